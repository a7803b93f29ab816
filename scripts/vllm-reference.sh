#!/usr/bin/env bash
# Regenerates kvplan's reference data for vLLM's formats from vLLM's own code:
# src/formats/turboquant_codebooks.h (TurboQuant's Lloyd-Max codebooks), src/formats/vllm_rht_signs.h
# (int4_per_token_head's rotation signs), and the golden bytes written by vLLM's Triton store
# kernels run on the CPU by Triton's interpreter (tests/formats/data/turboquant_golden.json,
# int4_per_token_head_golden.json). A developer tool, not part of
# the build or CI: it downloads the vLLM wheel (239 MB) and a torch + triton venv (about 5 GB) into
# the kvplan cache.
#
#   scripts/vllm-reference.sh
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
version=0.34.0
wheel="vllm-${version}-cp38-abi3-manylinux_2_28_x86_64.whl"
sha=79ca4b3cd74aec08c4bf476bdf0cb15735b605ae5368526a2faae1e30f044ca2

mkdir -p "${cache}/vllm-${version}"
if [[ ! -f "${cache}/vllm-${version}/${wheel}" ]]; then
  python3 -m pip download --no-deps --only-binary=:all: --dest "${cache}/vllm-${version}" \
    "vllm==${version}"
fi
echo "${sha}  ${cache}/vllm-${version}/${wheel}" | sha256sum -c --quiet
src="${cache}/vllm-${version}/src"
rm -rf "${src}"
mkdir -p "${src}"
unzip -q -o "${cache}/vllm-${version}/${wheel}" \
  'vllm/model_executor/layers/quantization/turboquant/centroids.py' \
  'vllm/v1/attention/ops/triton_turboquant_store.py' \
  'vllm/v1/attention/ops/int4_per_token_head.py' \
  'vllm/v1/attention/ops/triton_reshape_and_cache_flash.py' -d "${src}"

venv="${cache}/tq-venv"
if [[ ! -x "${venv}/bin/python" ]]; then
  python3 -m venv "${venv}"
fi
"${venv}/bin/pip" install -q torch==2.15.0 triton==3.9.0 numpy==2.4.6
"${venv}/bin/python" "${root}/scripts/vllm_reference.py" "${src}" "${version}"
clang-format -i "${root}/kernels/turboquant_codebooks.h" "${root}/kernels/vllm_rht_signs.h" \
  2>/dev/null || true
