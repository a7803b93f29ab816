#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (KVPLAN_FUZZ=ON, clang, ASan + UBSan) in build-fuzz and
# runs each for a bounded time or number of executions, one after another on one core, then prints
# a table of executions, coverage (cov: edges, ft: features) and corpus size per target. Not part of
# the default CI (the replay tests there feed the saved corpus and crashers through the same code).
#
#   scripts/ci/fuzz.sh                          # every target, 60 s each
#   scripts/ci/fuzz.sh plan config --runs 1000000
#   scripts/ci/fuzz.sh gguf --seconds 600
#
# New interesting inputs go to build-fuzz/corpus/<target>/ (seeded from tests/fuzz/corpus/); a
# finding (crash, leak, timeout, allocation over the limits below) is saved in
# build-fuzz/findings/<target>/ and makes the script exit 1. Copy a fixed finding into
# tests/fuzz/regressions/<target>/ so the replay test keeps it fixed.
# Environment: KVPLAN_FUZZ_CXX (default clang++-14), KVPLAN_JOBS (build jobs, default 2).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
all_targets=(gguf safetensors config tokenizer plan profile stored_object)
targets=()
bound=(-max_total_time=60)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) bound=(-max_total_time="$2"); shift 2 ;;
    --runs) bound=(-runs="$2"); shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")

cxx="${KVPLAN_FUZZ_CXX:-clang++-14}"
build="$root/build-fuzz"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Clang warns about things GCC (the CI compiler the warning set is tuned for) does not: no -Werror.
CXX="$cxx" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVPLAN_FUZZ=ON \
  -DKVPLAN_WERROR=OFF -DKVPLAN_BUILD_BENCHMARKS=OFF "${launcher[@]}" >/dev/null
ninja -C "$build" -j"${KVPLAN_JOBS:-2}" "${targets[@]/#/kvplan_fuzz_}"

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
table="| target | executions | exec/s | cov | ft | corpus | wall s | findings |"$'\n'
table+="|---|---:|---:|---:|---:|---:|---:|---|"$'\n'
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" findings="$build/findings/$t" log="$build/fuzz-$t.log"
  rm -rf "$findings"  # only this run's findings count
  mkdir -p "$corpus" "$findings"
  cp -n "$root/tests/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
  dict=()
  [[ -f "$root/tests/fuzz/dict/$t.dict" ]] && dict=(-dict="$root/tests/fuzz/dict/$t.dict")
  echo "== fuzz $t: ${bound[*]} (log $log)"
  start=$(date +%s)
  set +e
  # -malloc_limit_mb: no single allocation may exceed 512 MiB (the largest seed is a few KiB);
  # -rss_limit_mb: nor the whole process 2 GiB. -timeout: one input may not take 10 s (a hang).
  "$build/tests/fuzz/kvplan_fuzz_$t" "$corpus" "${dict[@]}" "${bound[@]}" -rss_limit_mb=2048 \
    -malloc_limit_mb=512 -timeout=10 -print_final_stats=1 -artifact_prefix="$findings/" \
    >"$log" 2>&1
  rc=$?
  set -e
  wall=$(( $(date +%s) - start ))
  stats=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(grep -oP 'stat::number_of_executed_units: *\K[0-9]+' "$log" || echo "?")
  rate=$(grep -oP 'stat::average_exec_per_sec: *\K[0-9]+' "$log" || echo "?")
  cov=$(grep -oP 'cov: \K[0-9]+' <<<"$stats" || echo "?")
  ft=$(grep -oP 'ft: \K[0-9]+' <<<"$stats" || echo "?")
  ncorp=$(find "$corpus" -type f | wc -l)
  found=$(find "$findings" -type f | wc -l)
  verdict="none"
  if [[ $rc -ne 0 || $found -gt 0 ]]; then
    verdict="**$found in build-fuzz/findings/$t (exit $rc)**"
    status=1
  fi
  table+="| $t | $execs | $rate | $cov | $ft | $ncorp | $wall | $verdict |"$'\n'
done
echo
printf '%s' "$table"
exit $status
