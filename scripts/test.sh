#!/usr/bin/env bash
# The test command: installs dependencies, sets up the cached Python venv, builds (the Python
# package included), fetches the SmolLM2-135M and Gemma 3 270M test models into the cache, and
# runs every test with ctest. Tests that need a model skip with a printed reason only
# when it is absent — unless KVPLAN_REQUIRE_MODELS=1, which CI sets (.ci/run): then a model that
# cannot be fetched stops this script, and a test whose model or data file is missing fails
# (tests/test_paths.h). GPU tests skip without a GPU either way; ctest lists them as skipped.
#
#   scripts/test.sh                           # developer run: missing models skip
#   KVPLAN_REQUIRE_MODELS=1 scripts/test.sh   # CI: missing models fail
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup/install-deps.sh
# The cached venv (pinned openai client, nanobind, torch, transformers, pytest): the kvplan serve
# client test, and the Python package, built into the same tree and tested with pytest.
python_flags=()
if python="$(scripts/setup/python-venv.sh)"; then
  python_flags=(-DKVPLAN_PYTHON=ON "-DPython_EXECUTABLE=${python}")
elif [[ "${KVPLAN_REQUIRE_MODELS:-0}" == 1 ]]; then
  echo "test: scripts/setup/python-venv.sh failed and KVPLAN_REQUIRE_MODELS=1: failing" >&2
  exit 1
else
  echo "test: scripts/setup/python-venv.sh failed; the Python package and the kvplan serve" \
    "client test are left out" >&2
fi
scripts/setup/build.sh "${python_flags[@]}"
for fetch in models/fetch-smollm2 models/fetch-gemma3; do
  if ! "scripts/${fetch}.sh"; then
    if [[ "${KVPLAN_REQUIRE_MODELS:-0}" == 1 ]]; then
      echo "test: scripts/${fetch}.sh failed and KVPLAN_REQUIRE_MODELS=1: failing" >&2
      exit 1
    fi
    echo "test: scripts/${fetch}.sh failed; the tests that need its model will skip" >&2
  fi
done
build_dir="${KVPLAN_BUILD_DIR:-build}"
# The AMD GPU path must compile even without a GPU: configure a KVPLAN_HIP=AMD build and build only
# the kernels and the GPU test binaries (their CPU tests run; the GPU ones skip with the reason).
hip_dir="${KVPLAN_HIP_BUILD_DIR:-build-hip}"
cmake -S . -B "${hip_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPLAN_WERROR=ON \
  -DKVPLAN_BUILD_BENCHMARKS=OFF -DKVPLAN_HIP=AMD >/dev/null
cmake --build "${hip_dir}" -j "$(nproc)" --target kvplan_kernels_test kvplan_gpu_test
"${hip_dir}/tests/kernels/kvplan_kernels_test" --gtest_brief=1
"${hip_dir}/tests/gpu/kvplan_gpu_test" --gtest_brief=1
ctest --test-dir "${build_dir}" --output-on-failure -j "$(nproc)" --timeout 900
# Sanitizers on every run: TSan over the runtime tests, ASan+UBSan over the core, formats, plan
# and runtime unit tests and the fuzz replays of every parser (scripts/ci/sanitize.sh ci). The full
# ASan+UBSan build of every unit test roughly doubles the run time on 2 cores, so it is opt-in:
# KVPLAN_CI_SANITIZE=1 (docs/fuzzing.md has the measurements).
if [[ "${KVPLAN_CI_SANITIZE:-0}" == 1 ]]; then
  scripts/ci/sanitize.sh all
else
  scripts/ci/sanitize.sh ci
fi
