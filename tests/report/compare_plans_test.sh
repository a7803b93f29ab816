#!/usr/bin/env bash
# scripts/ci/compare-plans.py, the drift check of scripts/ci/regenerate-references.sh --check: a
# plan agrees with itself and with a copy whose `created` time and mean KL moved within the
# tolerance; it must disagree when one layer's format changes or a mean KL moves beyond the
# tolerance.
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

fail=0
"${compare}" "${plan}" "${plan}" >/dev/null || { echo "FAIL: a plan differs from itself"; fail=1; }
"${compare}" "${plan}" "${work}/same.json" >/dev/null ||
  { echo "FAIL: created time and a 0.05 % KL change must be accepted"; fail=1; }
for v in layer kl baseline long; do
  if "${compare}" "${plan}" "${work}/${v}.json"; then
    echo "FAIL: drift '${v}' was not detected"
    fail=1
  fi
done
[[ ${fail} -eq 0 ]] && echo "PASS: compare-plans accepts tolerated changes and rejects drift"
exit ${fail}
