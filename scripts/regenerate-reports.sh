#!/usr/bin/env bash
# Regenerates the reference precision plans and reports in reports/<model>/ from scratch: profile
# the model (`kvplan tune --profile-out`), search the plan, then write report.html and report.md
# (`kvplan report`). The CI job of .github/workflows/plans.yml runs it with --check.
#
#   scripts/regenerate-reports.sh                      # every model, rewrite reports/<model>/
#   scripts/regenerate-reports.sh --only stories260k   # one model (stories260k | smollm2-135m)
#   scripts/regenerate-reports.sh --check              # regenerate into a temporary folder and
#                                                      # fail when a plan drifted (see below)
#   scripts/regenerate-reports.sh --reports-only       # only report.html / report.md, from the
#                                                      # committed profile and plan (seconds)
#
# --check fails (exit 1) when a regenerated plan differs from the committed one beyond the
# tolerance of scripts/compare-plans.py: every layer's key and value formats identical, and every
# measured mean KL (the plan's and each uniform baseline's) within 0.1 % relative. It also fails
# when a committed report is not byte-identical to what `kvplan report` writes today from the
# committed profile and plan. Measured on 2 busy cores: stories260k 5-25 s, smollm2-135m
# (30 layers x 9 pairs, dKL on 8 prompts, 2 searches) 32 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

kvplan="${KVPLAN_BUILD_DIR:-build}/kvplan"
models_dir="${KVPLAN_TEST_MODELS:-../shared/models}"
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
readonly kl_tolerance=0.001
# Memory table of every reference report (also the command's defaults).
readonly report_flags=(--gpu-memory 80GiB --context 4096,32768,131072)

only="" check=0 reports_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) only="${2:?--only needs a model: stories260k or smollm2-135m}"; shift 2 ;;
    --check) check=1; shift ;;
    --reports-only) reports_only=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "regenerate-reports: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "${only}" in
  ""|stories260k|smollm2-135m) ;;
  *) echo "regenerate-reports: --only ${only}: expected stories260k or smollm2-135m" >&2; exit 2 ;;
esac
[[ -x "${kvplan}" ]] || { echo "regenerate-reports: ${kvplan} not built (scripts/build.sh)" >&2; exit 2; }

model_file() {
  case "$1" in
    stories260k) echo "${models_dir}/stories260K.gguf" ;;
    smollm2-135m) scripts/fetch-smollm2.sh >&2; echo "${cache}/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
  esac
}

# Profile + plan (4 equivalent bits) for every model; SmolLM2 also gets a 3-bit plan from the
# same profile.
make_plans() {  # MODEL OUT_DIR
  local name="$1" out="$2" model
  model="$(model_file "${name}")"
  [[ -f "${model}" ]] || { echo "regenerate-reports: ${model} is missing" >&2; exit 2; }
  "${kvplan}" tune --model "${model}" --max-bits 4 -o "${out}/plan.json" \
    --profile-out "${out}/profile.json"
  if [[ "${name}" == smollm2-135m ]]; then
    "${kvplan}" search --profile "${out}/profile.json" --model "${model}" --max-bits 3 \
      -o "${out}/plan-3bit.json"
  fi
}

make_reports() {  # DIR: report.html and report.md from DIR/profile.json and DIR/plan.json
  local dir="$1" format
  for format in html md; do
    "${kvplan}" -q report --profile "${dir}/profile.json" --plan "${dir}/plan.json" \
      "${report_flags[@]}" --format "${format}" -o "${dir}/report.${format}"
  done
}

status=0
for name in stories260k smollm2-135m; do
  [[ -z "${only}" || "${only}" == "${name}" ]] || continue
  dir="reports/${name}"
  start=${SECONDS}
  echo "== ${name}"
  if [[ ${reports_only} -eq 1 ]]; then
    make_reports "${dir}"
  elif [[ ${check} -eq 0 ]]; then
    tmp="$(mktemp -d)"
    make_plans "${name}" "${tmp}"
    make_reports "${tmp}"
    mkdir -p "${dir}"
    cp "${tmp}"/*.json "${tmp}"/report.* "${dir}/"
    rm -rf "${tmp}"
  else
    tmp="$(mktemp -d)"
    # The committed reports must be what the command writes today from the committed inputs.
    cp "${dir}/profile.json" "${dir}/plan.json" "${tmp}/"
    make_reports "${tmp}"
    for format in html md; do
      if ! cmp -s "${tmp}/report.${format}" "${dir}/report.${format}"; then
        echo "regenerate-reports: ${dir}/report.${format} is stale (run --reports-only)" >&2
        status=1
      fi
    done
    # A plan regenerated from scratch must match the committed one within the tolerance.
    rm -f "${tmp}"/*.json
    make_plans "${name}" "${tmp}"
    for plan in "${tmp}"/plan*.json; do
      scripts/compare-plans.py --kl-tolerance "${kl_tolerance}" \
        "${dir}/$(basename "${plan}")" "${plan}" || status=1
    done
    rm -rf "${tmp}"
  fi
  echo "== ${name}: $((SECONDS - start)) s"
done
exit ${status}
