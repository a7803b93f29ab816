#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build, fetch a real model
# (SmolLM2-135M-Instruct, 30 layers) and tune its KV cache: profile every layer's sensitivity,
# search the per-layer (key, value) formats under a 4-bit budget, validate the best plans on
# held-out prompts, and write plan.json (+ profile.json), then show what engines can take of it.
#
#   scripts/quickstart.sh            # about 15 minutes on 2 cores
#   KVPLAN_BUDGET_BITS=3 scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/fetch-smollm2.sh
model="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}/SmolLM2-135M-Instruct.Q4_1.gguf"
out="${KVPLAN_OUT:-out/smollm2-135m}"
mkdir -p "${out}"
set -x
./build/kvplan tune --model "${model}" --max-bits "${KVPLAN_BUDGET_BITS:-4}" \
  -o "${out}/plan.json" --profile-out "${out}/profile.json"
./build/kvplan estimate --model "${model}" --plan "${out}/plan.json" --context 8K,32K --sequences 8
./build/kvplan export --plan "${out}/plan.json" --to kvtuner-yaml
./build/kvplan export --plan "${out}/plan.json" --to llamacpp
