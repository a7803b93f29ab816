#!/usr/bin/env bash
# Configures and builds kvplan (Release) into ./build, or $KVPLAN_BUILD_DIR.
#
#   scripts/setup/build.sh                 # kvplan, libraries, tests, benchmarks
#   scripts/setup/build.sh -DKVPLAN_HIP=AMD
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir="${KVPLAN_BUILD_DIR:-build}"
# Through ccache when it is installed: the wheel the tests build from the same sources
# (tests/python/wheel_test.sh) then compiles nothing twice.
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPLAN_WERROR=ON \
  "${launcher[@]}" "$@" >/dev/null
cmake --build "${build_dir}" -j "$(nproc)"
