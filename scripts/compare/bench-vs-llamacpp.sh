#!/usr/bin/env bash
# kvplan's harness side by side with llama.cpp: the same GGUF, text, protocol (chunks of 256
# tokens, BOS first, second half scored), thread count and f16/exact KV. Prints, per model, the
# medians over KVPLAN_BENCH_REPEATS (3) alternating runs of: tokens/s over the chunks (model
# loading excluded), the ratio kvplan / llama.cpp, wall seconds (loading included) and peak RSS.
#
# llama.cpp is a benchmark-only tool here, never a dependency of kvplan:
# scripts/compare/build-llamacpp.sh builds it once into the cache from the llama.cpp source the
# PyPI sdist llama-cpp-python==0.3.36 carries (vendor/llama.cpp), verified by the sdist's sha256.
#
#   scripts/compare/bench-vs-llamacpp.sh                 # every model present, 16 chunks
#   KVPLAN_BENCH_CHUNKS=38 KVPLAN_BENCH_THREADS=2 scripts/compare/bench-vs-llamacpp.sh
#
# Environment: KVPLAN_BUILD_DIR (kvplan's build, default build), KVPLAN_CACHE (default
# ~/.cache/kvplan), KVPLAN_TEST_MODELS (stories260K, default ../shared/models), KVPLAN_TEST_DATA
# (the text, default ../shared/data), KVPLAN_LLAMACPP_BIN (a directory holding a llama-perplexity
# already built from that source; skips the download and build).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
kvplan="${KVPLAN_BUILD_DIR:-build}/kvplan"
text="${KVPLAN_TEST_DATA:-../shared/data}/tinystories-valid-sample.txt"
threads="${KVPLAN_BENCH_THREADS:-$(nproc)}"
chunks="${KVPLAN_BENCH_CHUNKS:-16}"
repeats="${KVPLAN_BENCH_REPEATS:-3}"

die() { echo "bench-vs-llamacpp: error: $*" >&2; exit 2; }
# shellcheck source=build-llamacpp.sh
source scripts/compare/build-llamacpp.sh
[[ -x "${kvplan}" ]] || die "${kvplan} not built (scripts/setup/build.sh)"
[[ -f "${text}" ]] || die "${text} is missing"
command -v /usr/bin/time >/dev/null || die "/usr/bin/time is needed (apt-get install time)"

build_llamacpp
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT

models=("${KVPLAN_TEST_MODELS:-../shared/models}/stories260K.gguf"
        "${cache}/SmolLM2-135M-Instruct.Q4_1.gguf"
        "${cache}/gemma-3-270m-q4_k_m.gguf")
i=0
for model in "${models[@]}"; do
  if [[ ! -f "${model}" ]]; then
    echo "bench-vs-llamacpp: ${model} is missing (scripts/models/fetch-*.sh): left out" >&2
    continue
  fi
  # The two tools alternate, so a slow spell of the machine hits both; the table takes medians.
  # %M: peak resident set in KiB, %e: wall seconds (model loading included).
  for r in $(seq 1 "${repeats}"); do
    /usr/bin/time -f "rss_kib %M wall_s %e" "${llama_bin}/llama-perplexity" -m "${model}" \
      -f "${text}" -c 256 -b 256 -t "${threads}" --chunks "${chunks}" \
      >"${out}/llama-${i}-${r}.log" 2>&1 ||
      { tail -20 "${out}/llama-${i}-${r}.log" >&2; die "llama-perplexity failed on ${model}"; }
    /usr/bin/time -f "rss_kib %M wall_s %e" -o "${out}/kvplan-${i}-${r}.time" "${kvplan}" eval \
      --model "${model}" --text "${text}" --ctx 256 --chunks "${chunks}" --threads "${threads}" \
      --device cpu --json >"${out}/kvplan-${i}-${r}.json" 2>"${out}/kvplan-${i}-${r}.log" ||
      { tail -20 "${out}/kvplan-${i}-${r}.log" >&2; die "kvplan eval failed on ${model}"; }
  done
  echo "${model}" >"${out}/model-${i}"
  i=$((i + 1))
done

python3 - "${out}" "${i}" "${threads}" "${chunks}" "${repeats}" <<'PY'
import json, os, re, statistics, sys
out, n, threads, chunks, repeats = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])

def timing(text, key):
    return float(re.search(key + r" ([0-9.]+)", text).group(1))

def llama_run(log):
    ppl = float(re.search(r"Final estimate: PPL = ([0-9.]+)", log).group(1))
    # llama-perplexity stamps its log lines minutes.seconds.milliseconds.microseconds since start:
    # the chunks run between "calculating perplexity over N chunks, n_ctx=C" and the final line.
    def stamp(pattern):
        m = re.search(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) I " + pattern, log, re.M)
        mn, sec, ms, us = (int(g) for g in m.groups()[:4])
        return m, mn * 60 + sec + ms / 1e3 + us / 1e6
    start, t0 = stamp(r"perplexity: calculating perplexity over (\d+) chunks, n_ctx=(\d+)")
    _, t1 = stamp(r"Final estimate")
    tps = int(start.group(5)) * int(start.group(6)) / (t1 - t0)
    return ppl, tps, timing(log, "wall_s"), timing(log, "rss_kib") / 1024

def kvplan_run(i, r):
    res = json.load(open(f"{out}/kvplan-{i}-{r}.json"))["result"]
    t = open(f"{out}/kvplan-{i}-{r}.time").read()
    return res["ppl"], res["tokens_per_second"], timing(t, "wall_s"), timing(t, "rss_kib") / 1024

print(f"same GGUF, text, -c 256 -b 256, {chunks} chunks, {threads} threads, f16 (llama.cpp) / "
      f"exact (kvplan) KV; medians of {repeats} alternating runs; tok/s over the chunks, wall "
      f"with loading")
print(f"{'model':34} {'PPL':>15} {'tok/s':>13} {'ratio':>6} {'wall s':>13} {'peak RSS MiB':>13}")
print(f"{'':34} {'llama   kvplan':>15} {'llama kvplan':>13} {'':>6} {'llama kvplan':>13} {'llama kvplan':>13}")
for i in range(n):
    model = os.path.basename(open(f"{out}/model-{i}").read().strip())
    ll = [llama_run(open(f"{out}/llama-{i}-{r}.log").read()) for r in range(1, repeats + 1)]
    kv = [kvplan_run(i, r) for r in range(1, repeats + 1)]
    med = lambda runs, k: statistics.median(x[k] for x in runs)
    print(f"{model:34} {ll[0][0]:7.4f} {kv[0][0]:7.4f} {med(ll, 1):6.0f} {med(kv, 1):6.0f} "
          f"{med(kv, 1) / med(ll, 1):6.2f} {med(ll, 2):6.1f} {med(kv, 2):6.1f} "
          f"{med(ll, 3):6.0f} {med(kv, 3):6.0f}")
PY
