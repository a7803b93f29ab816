#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU: builds the NVIDIA path (nvcc through
# src/kernels/gpu_compat.h) into its own build dir, runs the GPU kernel tests and the kernel benchmark,
# and prints a short table. Needs the packages of scripts/setup/install-deps.sh plus a CUDA toolkit.
#
#   scripts/gpu-check.sh                      # build-cuda, architecture from nvidia-smi (else 90)
#   CUDA_ARCH=90 KVPLAN_GPU_BUILD_DIR=/tmp/b scripts/gpu-check.sh
#   KVPLAN_HIP=AMD scripts/gpu-check.sh       # the same on an AMD GPU (hipcc, gfx90a;gfx940)
set -euo pipefail
cd "$(dirname "$0")/.."
backend="${KVPLAN_HIP:-NVIDIA}"
build_dir="${KVPLAN_GPU_BUILD_DIR:-build-$( [[ ${backend} == AMD ]] && echo hip || echo cuda)}"
out_dir="${build_dir}/gpu-check"
jobs="$(nproc)"
export PATH="/usr/local/cuda/bin:${PATH}"
start=$(date +%s)

arch_flags=()
if [[ ${backend} == NVIDIA ]]; then
  command -v nvcc >/dev/null || { echo "gpu-check: nvcc not found (install a CUDA toolkit)" >&2; exit 1; }
  arch="${CUDA_ARCH:-}"
  if [[ -z ${arch} ]] && command -v nvidia-smi >/dev/null; then
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
  fi
  arch_flags=(-DCMAKE_CUDA_ARCHITECTURES="${arch:-90}")
fi

echo "gpu-check: configuring ${backend} build in ${build_dir}"
cmake -S . -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPLAN_WERROR=ON \
  -DKVPLAN_BUILD_BENCHMARKS=OFF -DKVPLAN_HIP="${backend}" "${arch_flags[@]}" >/dev/null
echo "gpu-check: building the GPU tests and kvplan (-j${jobs})"
cmake --build "${build_dir}" -j "${jobs}" --target kvplan_kernels_test kvplan_gpu_test kvplan kvplan_cli_test kvplan_runtime_test \
  kvplan_runtime_stress_test kvplan_bench_runtime >/dev/null
mkdir -p "${out_dir}"
built=$(date +%s)

echo "gpu-check: running the kernel tests"
set +e
timeout 240 "${build_dir}/tests/kernels/kvplan_kernels_test" > "${out_dir}/tests.log" 2>&1
test_rc=$?
timeout 60 "${build_dir}/tests/gpu/kvplan_gpu_test" >> "${out_dir}/tests.log" 2>&1 || test_rc=1
set -e
tested=$(date +%s)
if grep -q "SKIPPED.*GpuKernels" "${out_dir}/tests.log"; then
  grep -A1 "Skipped" "${out_dir}/tests.log" | head -2
  echo "gpu-check: the GPU tests skipped (no usable GPU) — nothing was checked on a device" >&2
  exit 1
fi

echo "gpu-check: kvplan profile --device gpu against --device cpu (stories260K)"
set +e
timeout 180 "${build_dir}/tests/cli/kvplan_cli_test" --gtest_filter='ProfileOnGpu*' \
  > "${out_dir}/profile.log" 2>&1
profile_rc=$?
set -e

echo "gpu-check: the runtime on GPU pages (backend tests, 200k-op stress, transfer benchmark)"
set +e
timeout 120 "${build_dir}/tests/runtime/kvplan_runtime_test" --gtest_filter='GpuBackend*' \
  > "${out_dir}/runtime.log" 2>&1
runtime_rc=$?
KVPLAN_STRESS_BACKEND=gpu KVPLAN_STRESS_OPS=200000 timeout 180 \
  "${build_dir}/tests/runtime/kvplan_runtime_stress_test" >> "${out_dir}/runtime.log" 2>&1
stress_rc=$?
timeout 120 "${build_dir}/tests/runtime/kvplan_bench_runtime" 100000 > "${out_dir}/runtime-bench.txt" 2>&1
runtime_bench_rc=$?
set -e

echo "gpu-check: kernel benchmark (32K tokens x batch 8)"
set +e
timeout 120 "${build_dir}/kvplan" bench kernels --device gpu --tokens 32K --batch 8 \
  > "${out_dir}/bench.txt" 2> "${out_dir}/bench.err"
bench_rc=$?
set -e
done_at=$(date +%s)

echo
echo "================ gpu-check (${backend}) ================"
grep -m1 "\[ gpu" "${out_dir}/tests.log" || true
printf "%-34s %s\n" "tests (exit ${test_rc})" "$(grep -E '^\[  (PASSED|FAILED) ' "${out_dir}/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \] [A-Za-z]" "${out_dir}/tests.log" | sort -u || true
worst_decode=$(grep "decode .*\[gpu\]" "${out_dir}/tests.log" | sed 's/.*f64 //' | sort -g | tail -1)
worst_batched=$(grep "batched .*\[gpu\]" "${out_dir}/tests.log" | sed 's/.*outputs \([^,]*\),.*/\1/' | sort -g | tail -1)
printf "%-34s %s\n" "decode max rel. error vs f64" "${worst_decode:-n/a} (limit 1e-3)"
printf "%-34s %s\n" "batched max rel. error vs f64" "${worst_batched:-n/a} (limit 1e-3)"
echo
if [[ ${bench_rc} -eq 0 ]]; then
  cat "${out_dir}/bench.txt"
else
  echo "bench failed (exit ${bench_rc}):"; tail -5 "${out_dir}/bench.err"
fi
echo
printf "%-34s %s\n" "profile gpu vs cpu (exit ${profile_rc})" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "${out_dir}/profile.log" | head -2 | tr '\n' ' ')"
printf "%-34s %s\n" "runtime GPU backend (exit ${runtime_rc})" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "${out_dir}/runtime.log" | head -3 | tr '\n' ' ')"
printf "%-34s %s\n" "runtime stress on GPU (exit ${stress_rc})" "$(grep -m1 -E 'ops|mismatch' "${out_dir}/runtime.log" || true)"
grep -A4 "^device tier" "${out_dir}/runtime-bench.txt" || tail -3 "${out_dir}/runtime-bench.txt"
echo
echo "time: build $((built - start)) s, tests $((tested - built)) s, bench $((done_at - tested)) s"
echo "logs: ${out_dir}/"
[[ ${test_rc} -eq 0 && ${bench_rc} -eq 0 && ${profile_rc} -eq 0 && ${runtime_rc} -eq 0 && ${stress_rc} -eq 0 && ${runtime_bench_rc} -eq 0 ]]
