#!/usr/bin/env bash
# The equal-memory serving result of data/reference/<model>/serving/: one `kvplan bench serve`
# invocation per model that serves the same seeded multi-round workload over bf16, q8_0, the best
# uniform pair at the plan's bytes (the reference report's "best uniform configuration within the
# budget") and the committed plan, at three memory sizes: KV memory for the running requests and a
# host tier for stored prefixes, scaled together. At the smallest the plan's bytes keep every
# user's conversation and bf16's keep about a third; at the middle one q8_0's fit too, at the
# largest bf16's. Writes serve.txt (the table) and serve.html (TTFT CDFs, the sweep).
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
    # A user's stored conversation grows to 8 chunks of 256 tokens (5.9 MB each in bf16, 3.1 MB
    # in q8_0, 1.7 MB with the plan): 12 users need ~150 MiB with the plan, ~280 MiB with q8_0,
    # ~540 MiB with bf16. 48 MiB of KV memory runs one bf16 request of the longest prompt and its
    # answer (2K tokens, 45 MiB).
    memories="48MiB,96MiB,192MiB"
    hosts="160MiB,320MiB,640MiB"
    ;;
  gemma3-270m)
    scripts/models/fetch-gemma3.sh >&2
    model="${cache}/gemma-3-270m-q4_k_m.gguf"
    plan="data/reference/gemma3-270m/plan-5184.json"
    # 4.7 MB per chunk in bf16, 2.5 MB in q8_0, 1.3 MB with the plan (a stored chunk holds every
    # layer; 15 of 18 layers keep only 512 tokens in the running cache).
    memories="24MiB,48MiB,96MiB"
    hosts="96MiB,192MiB,384MiB"
    ;;
  *) die "expected smollm2-135m or gemma3-270m, got '${name}'" ;;
esac
out="${KVPLAN_SERVE_OUT:-data/reference/${name}/serving}"
mkdir -p "${out}"
tmp=$(mktemp -d "${out}/.serve.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

# 12 users arrive about a second apart, each with the shared 256-token system prompt and a
# 768-token document, and ask up to 16 questions of 32 tokens, 2 s after each answer of 32
# tokens: more than any configuration finishes in the 150 s served, most of which come after
# every user's first prefill (the steady state of a multi-round conversation, where what is kept
# decides what is recomputed).
"${kvplan}" bench serve --model "${model}" \
  --kv "bf16/bf16,q8_0/q8_0,int4_kivi/tq_mse3,${plan}" \
  --kv-memory "${memories}" --host-memory "${hosts}" --users 12 --rounds 16 --system-tokens 256 \
  --document-tokens 768 --question-tokens 32 --answer-tokens 32 --user-interval 1 \
  --think-time 2 --duration 150 --quality-samples 3 --seed 1 \
  --html "${tmp}/serve.html" >"${tmp}/serve.txt"
mv "${tmp}/serve.txt" "${tmp}/serve.html" "${out}/"
cat "${out}/serve.txt"
