#!/usr/bin/env bash
# The Python venv of the kvplan cache ($KVPLAN_CACHE, default ~/.cache/kvplan/hf-venv) with every
# Python tool the tests use, pinned: the official `openai` client that tests/server drives `kvplan
# serve` with; nanobind and scikit-build-core, which build the `kvplan` package (src/python); torch,
# transformers, accelerate and gguf for kvplan.hf and the fixtures (scripts/fixtures); pytest and
# numpy. torch from PyPI is the CUDA build (about 5 GB with its nvidia-* wheels, a few minutes the
# first time); only its CPU path runs. Idempotent (a stamp of the pins); needs PyPI the first time.
#
#   scripts/setup/python-venv.sh      # prints the venv's python on the last line
set -euo pipefail
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
venv="${cache}/hf-venv"
pins=(openai==3.63.0 nanobind==3.1.0 scikit-build-core==1.1.2 torch==2.15.0 transformers==5.24.0
      tokenizers==0.23.3 safetensors==0.8.0 accelerate==1.16.0 gguf==0.19.0 numpy==2.4.6
      pytest==9.2.0)
stamp="${venv}/kvplan-pins.txt"
if [[ ! -x "${venv}/bin/python" ]]; then
  mkdir -p "${cache}"
  python3 -m venv "${venv}"
fi
if [[ "$(cat "${stamp}" 2>/dev/null)" != "${pins[*]}" ]]; then
  "${venv}/bin/pip" install -q "${pins[@]}"
  echo "${pins[*]}" > "${stamp}"
fi
echo "python-venv: ${venv} has ${pins[*]}" >&2
echo "${venv}/bin/python"
