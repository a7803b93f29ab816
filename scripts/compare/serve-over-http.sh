#!/usr/bin/env bash
# The HTTP overhead of `kvplan serve`: one seeded multi-turn workload served in process by
# `kvplan bench serve`, then the same requests sent over HTTP (`bench serve --url`) to a
# `kvplan serve` with the same KV memory, host tier and device-tier staging, for the plan and for
# bf16. Prints both tables; the TTFT and tokens/s ratios are HTTP over in-process.
#
#   scripts/compare/serve-over-http.sh [out-dir]     # default /tmp/kvplan-serve-over-http
#
# Environment: KVPLAN_BUILD_DIR (default build), KVPLAN_CACHE (default ~/.cache/kvplan).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
kvplan="${KVPLAN_BUILD_DIR:-build}/kvplan"
die() { echo "serve-over-http: error: $*" >&2; exit 2; }
[[ -x "${kvplan}" ]] || die "${kvplan} not built (scripts/setup/build.sh)"
scripts/models/fetch-smollm2.sh >&2
model="${cache}/SmolLM2-135M-Instruct.Q4_1.gguf"
out="${1:-/tmp/kvplan-serve-over-http}"
mkdir -p "${out}"
tiers=(--kv-memory 32MiB --host-memory 128MiB --threads 2)
workload=(--users 8 --rounds 3 --system-tokens 256 --document-tokens 768 --question-tokens 32
  --answer-tokens 32 --user-interval 0.5 --think-time 2
  --text ../shared/data/tinystories-valid-sample.txt)

server=""
trap '[[ -n "${server}" ]] && kill -TERM "${server}" 2>/dev/null || true' EXIT
for kv in data/reference/smollm2-135m/plan-6480.json bf16/bf16; do
  name="$(basename "${kv}" .json | tr / _)"
  case "${kv}" in *.json) served=(--plan "${kv}") ;; *) served=(--kv "${kv}") ;; esac
  "${kvplan}" bench serve --model "${model}" --kv "${kv}" "${tiers[@]}" --quality-samples 0 \
    "${workload[@]}" >"${out}/${name}-in-process.txt"
  staging="$(grep -o 'staging [0-9]* tokens' "${out}/${name}-in-process.txt" | grep -o '[0-9]*')"
  "${kvplan}" serve --model "${model}" "${served[@]}" "${tiers[@]}" --port 0 \
    --staging-tokens "${staging}" >"${out}/${name}-server.txt" 2>"${out}/${name}-server.log" &
  server=$!
  for _ in $(seq 100); do grep -q listening "${out}/${name}-server.txt" && break; sleep 0.2; done
  url="$(grep -o 'http://[0-9.]*:[0-9]*' "${out}/${name}-server.txt")" ||
    die "kvplan serve did not start: $(cat "${out}/${name}-server.log")"
  "${kvplan}" bench serve --url "${url}" --model "${model}" "${workload[@]}" \
    >"${out}/${name}-http.txt"
  kill -TERM "${server}"
  wait "${server}"
  server=""
  echo "== ${kv}: in process, then over HTTP"
  grep -E "^(kv |plan:|bf16)" "${out}/${name}-in-process.txt"
  grep -E "^http:" "${out}/${name}-http.txt"
done
