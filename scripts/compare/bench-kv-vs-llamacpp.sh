#!/usr/bin/env bash
# Prefill and decode speed with f16 and packed q4_0 KV, kvplan's harness beside llama.cpp's
# llama-bench on the same GGUF and thread count: prefill of P tokens into an empty cache, then
# decode steps with P tokens already in the cache (llama-bench -p P -n 0, and -p 0 -n D -d P, with
# flash attention on, the path that keeps K and V quantized). Prints tokens/s per tool, the ratio
# kvplan / llama.cpp, and each tool's q4_0 / f16 ratio, all from this one run.
#
#   scripts/compare/bench-kv-vs-llamacpp.sh                          # SmolLM2, P=4096, D=64
#   KVPLAN_BENCH_MODEL=~/.cache/kvplan/gemma-3-270m-q4_k_m.gguf \
#     scripts/compare/bench-kv-vs-llamacpp.sh
#
# Environment: KVPLAN_BENCH_MODEL (a GGUF, default the cached SmolLM2-135M-Instruct Q4_1),
# KVPLAN_BENCH_PROMPT (P, 4096), KVPLAN_BENCH_DECODE (D, 64), KVPLAN_BENCH_THREADS (all cores),
# KVPLAN_BENCH_REPEATS (llama-bench repetitions, 3), KVPLAN_BUILD_DIR (default build),
# KVPLAN_CACHE (default ~/.cache/kvplan), KVPLAN_LLAMACPP_BIN (see build-llamacpp.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
kvplan="${KVPLAN_BUILD_DIR:-build}/kvplan"
model="${KVPLAN_BENCH_MODEL:-${cache}/SmolLM2-135M-Instruct.Q4_1.gguf}"
prompt="${KVPLAN_BENCH_PROMPT:-4096}"
decode="${KVPLAN_BENCH_DECODE:-64}"
threads="${KVPLAN_BENCH_THREADS:-$(nproc)}"
repeats="${KVPLAN_BENCH_REPEATS:-3}"

die() { echo "bench-kv-vs-llamacpp: error: $*" >&2; exit 2; }
# shellcheck source=build-llamacpp.sh
source scripts/compare/build-llamacpp.sh
[[ -x "${kvplan}" ]] || die "${kvplan} not built (scripts/setup/build.sh)"
[[ -f "${model}" ]] || die "${model} is missing (scripts/models/fetch-*.sh)"

build_llamacpp
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT

for kv in f16 q4_0; do
  "${llama_bin}/llama-bench" -m "${model}" -t "${threads}" -fa 1 -ctk "${kv}" -ctv "${kv}" \
    -r "${repeats}" -p "${prompt}" -n 0 -o json >"${out}/llama-pp-${kv}.json" \
    2>"${out}/llama-pp-${kv}.log" ||
    { tail -20 "${out}/llama-pp-${kv}.log" >&2; die "llama-bench failed"; }
  "${llama_bin}/llama-bench" -m "${model}" -t "${threads}" -fa 1 -ctk "${kv}" -ctv "${kv}" \
    -r "${repeats}" -p 0 -n "${decode}" -d "${prompt}" -o json >"${out}/llama-tg-${kv}.json" \
    2>"${out}/llama-tg-${kv}.log" ||
    { tail -20 "${out}/llama-tg-${kv}.log" >&2; die "llama-bench failed"; }
done
"${kvplan}" bench kv --model "${model}" --kv f16/f16,q4_0/q4_0 --memory-tokens "${prompt}" \
  --prompt-tokens "${prompt}" --decode-tokens "${decode}" --threads "${threads}" --json \
  >"${out}/kvplan.json" 2>"${out}/kvplan.log" ||
  { tail -20 "${out}/kvplan.log" >&2; die "kvplan bench kv failed"; }

python3 - "${out}" "${model}" "${prompt}" "${decode}" "${threads}" <<'PY'
import json, os, sys
out, model, prompt, decode, threads = sys.argv[1:6]

def llama(kind, kv):
    rows = json.load(open(f"{out}/llama-{kind}-{kv}.json"))
    return rows[0]["avg_ts"]

configs = json.load(open(f"{out}/kvplan.json"))["configs"]
ours = {c["kv"].split("/")[0]: c for c in configs}
print(f"{os.path.basename(model)}: prefill {prompt} tokens into an empty cache; decode {decode} "
      f"tokens after {prompt}; {threads} threads; llama.cpp flash attention on")
print(f"{'KV':6} {'prefill tok/s':>22} {'ratio':>6} {'decode tok/s':>22} {'ratio':>6}")
print(f"{'':6} {'llama.cpp    kvplan':>22} {'':>6} {'llama.cpp    kvplan':>22} {'':>6}")
rows = {}
for kv in ("f16", "q4_0"):
    lp, lt = llama("pp", kv), llama("tg", kv)
    kp, kt = ours[kv]["prefill_tokens_per_s"], ours[kv]["decode_tokens_per_s"]
    rows[kv] = (lp, kp, lt, kt)
    print(f"{kv:6} {lp:10.1f} {kp:10.1f} {kp / lp:6.2f} {lt:10.2f} {kt:10.2f} {kt / lt:6.2f}")
f, q = rows["f16"], rows["q4_0"]
print(f"{'q4_0/f16':8} {q[0] / f[0]:8.2f} {q[1] / f[1]:10.2f} {'':6} {q[2] / f[2]:10.2f} "
      f"{q[3] / f[3]:10.2f}")
PY
