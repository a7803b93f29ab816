#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build, fetch a real model
# (SmolLM2-135M-Instruct, 30 layers) and tune its KV cache: profile every layer's sensitivity,
# search every layer's key format and value format from the whole catalogue under a budget of
# 4.5 effective bits per value (scales included: the bytes of llama.cpp's q4_0/q4_0), choose among
# validated plans on the selection text, measure the plan and the uniform baselines on the report
# text, and write plan.json (+ profile.json), then show what engines can take of it.
#
#   scripts/quickstart.sh            # about 35 minutes on 2 cores
#   KVPLAN_BUDGET_BITS=4 scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup/install-deps.sh
scripts/setup/build.sh
scripts/models/fetch-smollm2.sh
model="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}/SmolLM2-135M-Instruct.Q4_1.gguf"
out="${KVPLAN_OUT:-out/smollm2-135m}"
mkdir -p "${out}"
set -x
./build/kvplan tune --model "${model}" --max-bits "${KVPLAN_BUDGET_BITS:-4.5}" \
  -o "${out}/plan.json" --profile-out "${out}/profile.json"
./build/kvplan estimate --model "${model}" --plan "${out}/plan.json" --context 8K,32K --sequences 8
set +x
# What each engine can take of the plan: its configuration with every loss listed, or (exit 2)
# why it cannot run any layer of it and the `kvplan tune --engine E` that gives a plan it runs.
# The default catalogue's plans use formats several engines do not store, so a refusal here is
# an answer, not a failure of the quickstart; any other exit code is.
for engine in llamacpp ik-llamacpp vllm vllm-turboquant trtllm hf; do
  echo "== kvplan export --to ${engine}"
  rc=0
  ./build/kvplan export --plan "${out}/plan.json" --to "${engine}" || rc=$?
  (( rc == 0 || rc == 2 )) || exit "${rc}"
done
