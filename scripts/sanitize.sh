#!/usr/bin/env bash
# Builds the runtime tests under ThreadSanitizer and under AddressSanitizer + UBSan, each in its
# own build directory, and runs them (the stress test at its default 100k operations; set
# KVPLAN_STRESS_OPS to change that).
#
#   scripts/sanitize-runtime.sh            # both
#   scripts/sanitize-runtime.sh thread     # one of: thread, address
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${KVPLAN_JOBS:-2}"
targets=(kvplan_runtime_test kvplan_runtime_stress_test)
run() {
  local name="$1" sanitize="$2" dir="$root/build-$1"
  echo "== $name: -DKVPLAN_SANITIZE=$sanitize -> $dir"
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVPLAN_WERROR=ON \
    -DKVPLAN_BUILD_BENCHMARKS=OFF -DKVPLAN_SANITIZE="$sanitize" >/dev/null
  ninja -C "$dir" -j"$jobs" "${targets[@]}"
  for t in "${targets[@]}"; do
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      "$dir/tests/runtime/$t"
  done
  echo "== $name: clean"
}
case "${1:-all}" in
  thread) run tsan thread ;;
  address) run asan "address;undefined" ;;
  all) run tsan thread; run asan "address;undefined" ;;
  *) echo "usage: $0 [thread|address|all]" >&2; exit 2 ;;
esac
