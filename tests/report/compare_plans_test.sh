#!/usr/bin/env bash
# scripts/ci/compare-plans.py, the drift check of scripts/ci/regenerate-references.sh --check: a
# plan agrees with itself and with a copy whose `created` time and mean KL moved within the
# tolerance; it must disagree when one layer's format changes or a mean KL moves beyond the
# tolerance. With --accept-within-interval (plans of another build) a changed layer or KL is
# accepted while the plan's advantage over its best uniform pair stays inside the committed
# paired-bootstrap interval, and refused once it leaves it.
set -euo pipefail
source_dir="$1"
compare="${source_dir}/scripts/ci/compare-plans.py"
plan="${source_dir}/data/reference/stories260k/plan-320.json"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

variant() {  # NAME PYTHON-STATEMENT-ON-p
  python3 - "${plan}" "${work}/$1.json" "$2" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
}
variant same 'p["created"] = "2000-01-01T00:00:00Z"; p["quality"]["mean_kl"] *= 1.0005'
variant layer 'p["layers"][1]["key"] = "int2" if p["layers"][1]["key"] != "int2" else "int4"'
variant kl 'p["quality"]["mean_kl"] *= 1.01'
variant baseline 'p["baselines"][0]["mean_kl"] *= 1.01'
variant long 'p["quality"]["long_context"]["rows"][-1]["plan_mean_kl"] *= 1.01'
variant worse 'p["quality"]["mean_kl"] = p["quality"]["best_uniform"]["mean_kl"] * 0.99'
variant other_pair 'p["quality"]["best_uniform"]["kv"] = "q8_0/q8_0"'
variant fewer_baselines 'p["baselines"] = p["baselines"][1:]'

fail=0
"${compare}" "${plan}" "${plan}" >/dev/null || { echo "FAIL: a plan differs from itself"; fail=1; }
"${compare}" "${plan}" "${work}/same.json" >/dev/null ||
  { echo "FAIL: created time and a 0.05 % KL change must be accepted"; fail=1; }
for v in layer kl baseline long fewer_baselines; do
  if "${compare}" "${plan}" "${work}/${v}.json"; then
    echo "FAIL: drift '${v}' was not detected"
    fail=1
  fi
done
for v in layer kl baseline long; do
  "${compare}" --accept-within-interval "${plan}" "${work}/${v}.json" >/dev/null ||
    { echo "FAIL: drift '${v}' inside the interval was refused with --accept-within-interval"; fail=1; }
done
for v in worse other_pair; do
  if "${compare}" --accept-within-interval "${plan}" "${work}/${v}.json" >/dev/null; then
    echo "FAIL: '${v}' left the committed interval but was accepted"
    fail=1
  fi
done
{ "${compare}" "${plan}" "${work}/kl.json" || true; } | grep -q "+1.00 %" ||
  { echo "FAIL: a difference is printed without its relative size"; fail=1; }
# A changed set of measured pairs names what left it, not every pair of both sets.
dropped="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["baselines"][0]["kv"])' \
  "${plan}")"
message="$({ "${compare}" "${plan}" "${work}/fewer_baselines.json" || true; } | grep "baselines measured")"
[[ "${message}" == *"no longer measured ${dropped}" && "${message}" != *"newly measured"* ]] ||
  { echo "FAIL: a changed baseline set is printed as '${message}'"; fail=1; }
[[ ${fail} -eq 0 ]] && echo "PASS: compare-plans accepts tolerated changes and rejects drift"
exit ${fail}
