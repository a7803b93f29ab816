#!/usr/bin/env bash
# Regenerates tests/fixtures/hf/<family>/: tiny random-initialized HF transformers models of each
# family the harness runs, with the logits transformers computes for them (scripts/hf_fixtures.py).
# torch and transformers are test tools only: they live in a venv in the kvplan cache
# ($KVPLAN_CACHE, default ~/.cache/kvplan), pinned to the versions the committed fixtures came from.
#
#   scripts/make-hf-fixtures.sh                 # all families
#   scripts/make-hf-fixtures.sh --family gemma2 # one
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
venv="${cache}/hf-venv"
if [[ ! -x "${venv}/bin/python" ]]; then
  python3 -m venv "${venv}"
fi
# torch from PyPI is the CUDA build (about 5 GB with its nvidia-* wheels); only its CPU path runs.
"${venv}/bin/pip" install -q torch==2.15.0 transformers==5.24.0 tokenizers==0.23.3 \
  safetensors==0.8.0 numpy==2.4.6
cd "${root}"
"${venv}/bin/python" scripts/hf_fixtures.py --out tests/fixtures/hf "$@"
