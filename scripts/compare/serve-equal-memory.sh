#!/usr/bin/env bash
# The equal-memory serving result of data/reference/<model>/serving/: one `kvplan bench serve`
# invocation per model that serves the same seeded workload over bf16, q8_0, the best uniform
# pair at the plan's bytes (the reference report's "best uniform configuration within the
# budget") and the committed plan, at three KV memories, the smallest too small for bf16 to keep
# the workload's working set. Writes serve.txt (the table) and serve.html (TTFT CDFs, the sweep).
#
#   scripts/compare/serve-equal-memory.sh smollm2-135m
#   scripts/compare/serve-equal-memory.sh gemma3-270m
#
# Environment: KVPLAN_BUILD_DIR (default build), KVPLAN_CACHE (default ~/.cache/kvplan),
# KVPLAN_SERVE_OUT (default data/reference/<model>/serving).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
kvplan="${KVPLAN_BUILD_DIR:-build}/kvplan"
die() { echo "serve-equal-memory: error: $*" >&2; exit 2; }
[[ -x "${kvplan}" ]] || die "${kvplan} not built (scripts/setup/build.sh)"

name="${1:-}"
case "${name}" in
  smollm2-135m)
    scripts/models/fetch-smollm2.sh >&2
    model="${cache}/SmolLM2-135M-Instruct.Q4_1.gguf"
    plan="data/reference/smollm2-135m/plan-6480.json"
    memories="32MiB,64MiB,128MiB"
    host="128MiB"
    ;;
  gemma3-270m)
    scripts/models/fetch-gemma3.sh >&2
    model="${cache}/gemma-3-270m-q4_k_m.gguf"
    plan="data/reference/gemma3-270m/plan-5184.json"
    memories="12MiB,24MiB,48MiB"
    host="32MiB"
    ;;
  *) die "expected smollm2-135m or gemma3-270m, got '${name}'" ;;
esac
out="${KVPLAN_SERVE_OUT:-data/reference/${name}/serving}"
mkdir -p "${out}"
tmp=$(mktemp -d "${out}/.serve.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

# 16 users arrive within 8 s, each with the shared 256-token system prompt and a 768-token
# document, and ask 4 questions of 32 tokens, 2 s apart, answered in 32 tokens; 60 s of serving.
"${kvplan}" bench serve --model "${model}" \
  --kv "bf16/bf16,q8_0/q8_0,int4_kivi/tq_mse3,${plan}" \
  --kv-memory "${memories}" --host-memory "${host}" --users 16 --rounds 4 --system-tokens 256 \
  --document-tokens 768 --question-tokens 32 --answer-tokens 32 --user-interval 0.5 \
  --think-time 2 --duration 60 --quality-samples 3 --seed 1 \
  --html "${tmp}/serve.html" >"${tmp}/serve.txt"
mv "${tmp}/serve.txt" "${tmp}/serve.html" "${out}/"
cat "${out}/serve.txt"
