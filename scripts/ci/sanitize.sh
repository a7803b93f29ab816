#!/usr/bin/env bash
# Sanitizer builds, each in its own build directory (RelWithDebInfo, benchmarks off), then their
# tests:
#   address  AddressSanitizer + UndefinedBehaviorSanitizer: the unit tests, i.e. every ctest but
#            the slow end-to-end model runs (KVPLAN_SANITIZE_SKIP, a ctest -E regex), and the fuzz
#            replay tests (the corpus and found crashers through every parser)
#   thread   ThreadSanitizer: the runtime tests, the stress test at its default 100k operations
#            (set KVPLAN_STRESS_OPS to change that), and the serving engine's tests (the worker
#            thread of `kvplan serve`; their model build adds minutes, so the ci mode leaves them out)
#   ci       what every CI run does (scripts/test.sh), sized for 2 cores: `thread`, then an
#            ASan+UBSan build of only the unit-test binaries of core, formats, plan and runtime and
#            the fuzz replays of every parser, run directly (no CLI, search, report or model runs)
#
#   scripts/ci/sanitize.sh            # thread + address
#   scripts/ci/sanitize.sh thread     # one of: thread, address, ci
#
# Environment: KVPLAN_JOBS (build and test jobs, default nproc), KVPLAN_SANITIZE_TESTS (a ctest -R
# regex to run fewer tests), CMAKE_CXX_COMPILER_LAUNCHER (e.g. ccache).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
jobs="${KVPLAN_JOBS:-$(nproc)}"
# The end-to-end model runs (SmolLM2 profiling/eval/greedy text, stories260K eval, tune) take
# 5-50 s each in a Release build, minutes under ASan, and reach no code the faster tests miss.
skip="${KVPLAN_SANITIZE_SKIP:-SmolLM2|^Eval[.]|^TuneCommand[.]}"
launcher=()
[[ -n "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]] &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CMAKE_CXX_COMPILER_LAUNCHER")

# The ci mode keeps line tables only (-g1: function names and lines in reports), which compiles
# the template-heavy sources markedly faster than full debug info on 2 cores.
debug_flags=()
[[ "${1:-all}" == ci ]] && debug_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")

configure() {  # dir sanitize
  echo "== $1: -DKVPLAN_SANITIZE=$2"
  cmake -S "$root" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVPLAN_WERROR=ON \
    -DKVPLAN_BUILD_BENCHMARKS=OFF -DKVPLAN_SANITIZE="$2" "${launcher[@]}" "${debug_flags[@]}" \
    >/dev/null
}

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"

address() {
  local dir="$root/build-asan" start=$SECONDS
  configure "$dir" "address;undefined"
  ninja -C "$dir" -j"$jobs"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 900 -E "$skip" \
    ${KVPLAN_SANITIZE_TESTS:+-R "$KVPLAN_SANITIZE_TESTS"}
  echo "== address;undefined: clean ($((SECONDS - start)) s)"
}

thread() {  # [with-serve]
  local dir="$root/build-tsan" start=$SECONDS
  local targets=(kvplan_runtime_test kvplan_runtime_stress_test)
  configure "$dir" thread
  ninja -C "$dir" -j"$jobs" "${targets[@]}"
  for t in "${targets[@]}"; do "$dir/tests/runtime/$t" --gtest_brief=1; done
  if [[ "${1:-}" == with-serve ]]; then
    ninja -C "$dir" -j"$jobs" kvplan_serve_test
    "$dir/tests/serve/kvplan_serve_test" --gtest_brief=1 --gtest_filter='EngineTest.*'
  fi
  echo "== thread: clean ($((SECONDS - start)) s)"
}

address_units() {
  local dir="$root/build-asan-ci" start=$SECONDS
  local units=(core/kvplan_core_test formats/kvplan_formats_test plan/kvplan_plan_test
    engines/kvplan_engines_test runtime/kvplan_runtime_test)
  local parsers=(gguf safetensors config tokenizer plan profile stored_object)
  configure "$dir" "address;undefined"
  ninja -C "$dir" -j"$jobs" "${units[@]##*/}" $(printf 'kvplan_fuzz_%s_replay ' "${parsers[@]}")
  for u in "${units[@]}"; do "$dir/tests/$u" --gtest_brief=1; done
  for p in "${parsers[@]}"; do
    "$dir/tests/fuzz/kvplan_fuzz_${p}_replay" "$root/tests/fuzz/corpus/$p" \
      "$root/tests/fuzz/regressions/$p"
  done
  echo "== address;undefined (unit tests + fuzz replays): clean ($((SECONDS - start)) s)"
}

case "${1:-all}" in
  thread) thread with-serve ;;
  address) address ;;
  ci) thread; address_units ;;
  all) thread with-serve; address ;;
  *) echo "usage: $0 [thread|address|ci|all]" >&2; exit 2 ;;
esac
