#!/usr/bin/env bash
# Configures and builds kvplan (Release) into ./build, or $KVPLAN_BUILD_DIR.
#
#   scripts/setup/build.sh                 # kvplan, libraries, tests, benchmarks
#   scripts/setup/build.sh -DKVPLAN_HIP=AMD
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir="${KVPLAN_BUILD_DIR:-build}"
cmake -S . -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPLAN_WERROR=ON "$@" >/dev/null
cmake --build "${build_dir}" -j "$(nproc)"
