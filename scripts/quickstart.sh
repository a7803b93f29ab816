#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build, fetch a real model
# (SmolLM2-135M-Instruct, 30 layers), and run kvplan on it: what its KV cache costs, and how
# quantized KV formats change its output on real text.
#
#   scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/fetch-smollm2.sh
model="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}/SmolLM2-135M-Instruct.Q4_1.gguf"
text="../shared/data/tinystories-valid-sample.txt"
[[ -f "${text}" ]] || text="configs/calibration/sample.txt"
set -x
./build/kvplan inspect --model "${model}"
./build/kvplan estimate --model "${model}" --context 8K,32K --sequences 8
./build/kvplan eval --model "${model}" --text "${text}" --kv K8V4
