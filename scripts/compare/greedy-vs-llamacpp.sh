#!/usr/bin/env bash
# Greedy generation of kvplan and llama.cpp's llama-simple on the same GGUFs and prompts (no chat
# template, BOS first, exact/f16 KV): per prompt, the tokens that agree and, at the first
# divergence, kvplan's logits for both choices (scripts/compare/greedy-vs-llamacpp.py).
#
#   scripts/compare/greedy-vs-llamacpp.sh    # stories260K, SmolLM2-135M, Gemma 3 270M, 20 tokens
#   KVPLAN_GREEDY_TOKENS=40 scripts/compare/greedy-vs-llamacpp.sh
#
# Environment as scripts/compare/bench-vs-llamacpp.sh (KVPLAN_BUILD_DIR, KVPLAN_CACHE,
# KVPLAN_TEST_MODELS, KVPLAN_LLAMACPP_BIN).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
kvplan="${KVPLAN_BUILD_DIR:-build}/kvplan"
tokens="${KVPLAN_GREEDY_TOKENS:-20}"
die() { echo "greedy-vs-llamacpp: error: $*" >&2; exit 2; }
# shellcheck source=build-llamacpp.sh
source scripts/compare/build-llamacpp.sh
[[ -x "${kvplan}" ]] || die "${kvplan} not built (scripts/setup/build.sh)"
build_llamacpp

prompts=("Once upon a time" "The capital of France is" "def fibonacci(n):" "Water boils at"
         "My favourite colour is")
for model in "${KVPLAN_TEST_MODELS:-../shared/models}/stories260K.gguf" \
             "${cache}/SmolLM2-135M-Instruct.Q4_1.gguf" "${cache}/gemma-3-270m-q4_k_m.gguf"; do
  if [[ ! -f "${model}" ]]; then
    echo "greedy-vs-llamacpp: ${model} is missing (scripts/models/fetch-*.sh): left out" >&2
    continue
  fi
  scripts/compare/greedy-vs-llamacpp.py --kvplan "${kvplan}" --llama-simple "${llama_bin}/llama-simple" \
    --model "${model}" --tokens "${tokens}" "${prompts[@]}"
done
