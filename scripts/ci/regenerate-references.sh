#!/usr/bin/env bash
# Regenerates the reference precision plans and reports in data/reference/<model>/ from scratch:
# profile the model (`kvplan tune --profile-out`), search the plan, then write report.html and
# report.md (`kvplan report`). The CI job of .github/workflows/plans.yml runs it with --check.
#
#   scripts/ci/regenerate-references.sh                     # every model, rewrite data/reference/<model>/
#   scripts/ci/regenerate-references.sh --only stories260k  # one model (stories260k | smollm2-135m |
#                                                           # gemma3-270m)
#   scripts/ci/regenerate-references.sh --check             # regenerate into a temporary folder and
#                                                           # fail when a plan drifted (see below)
#   scripts/ci/regenerate-references.sh --reports-only      # only report.html / report.md, from the
#                                                           # committed profile and plan (seconds)
#   scripts/ci/regenerate-references.sh --check --keep DIR  # also keep what --check regenerated, in
#                                                           # DIR/<model>/ (to diff or inspect)
#   scripts/ci/regenerate-references.sh --only smollm2-135m --budget 12240
#                                                           # one budget's plan: the profile by
#                                                           # `kvplan profile` (or `tune` at the
#                                                           # first budget), then that search
#   scripts/ci/regenerate-references.sh --only gemma3-270m --measurements runs/cells.jsonl
#                                                           # keep every measurement in a file: run
#                                                           # again after a stop, it measures only
#                                                           # what is missing (the same bits)
#
# --check fails (exit 1) when a regenerated plan differs from the committed one beyond the
# tolerance of scripts/ci/compare-plans.py: every layer's key and value formats identical, and every
# measured mean KL (the plan's and each uniform baseline's) within 0.1 % relative. It also fails
# when a committed report is not byte-identical to what `kvplan report` writes today from the
# committed profile and plan. A binary of another -DKVPLAN_ISA cannot give the same bits; its
# plans pass when their advantage over the best uniform pair stays inside the committed 95 %
# paired-bootstrap interval (compare-plans.py --accept-within-interval). Each model has one
# profile and a plan per budget (bytes per token), plan-<bytes>.json with report-<bytes>.html/.md:
# stories260k at 320 (uniform int4 or fp8) and 360 B/token, smollm2-135m at 5760 (uniform K4V2),
# 6480 (q4_0/q4_0) and 12240 (q8_0/q8_0) B/token, gemma3-270m at 5184 (q4_0/q4_0) and 9792
# (q8_0/q8_0) B/token. Every plan is chosen on configs/calibration/selection.jsonl and measured on
# configs/calibration/report.jsonl.
#
# --budget splits a model's regeneration into one job per budget (the plans workflow's matrix; a
# SmolLM2 budget takes about an hour on 2 cores): each job makes the profile again (the same bits
# as the tune's: its hash leaves out the timings) and searches its budget only. Without --check it
# rewrites that plan and its reports, and refuses when the profile it made is not the one the
# other committed plans record (then every budget must be regenerated).
#
# The searches of one run share one `--measurements` file (a temporary one unless named), so a
# uniform pair measured at one budget is read back at the next; a named file outlives the run.
set -euo pipefail
invoked_from="${PWD}"
cd "$(dirname "$0")/../.."

kvplan="${KVPLAN_BUILD_DIR:-build}/kvplan"
models_dir="${KVPLAN_TEST_MODELS:-../shared/models}"
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
readonly kl_tolerance=0.001
# Memory table of every reference report (also the command's defaults).
readonly report_flags=(--gpu-memory 80GiB --context 4096,32768,131072)

only="" check=0 reports_only=0 keep="" budget_only="" measurements=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) only="${2:?--only needs a model: stories260k, smollm2-135m or gemma3-270m}"; shift 2 ;;
    --check) check=1; shift ;;
    --reports-only) reports_only=1; shift ;;
    --keep)
      keep="${2:?--keep needs a folder}"
      [[ "${keep}" == /* ]] || keep="${invoked_from}/${keep}"
      shift 2 ;;
    --budget) budget_only="${2:?--budget needs bytes per token}"; shift 2 ;;
    --measurements)
      measurements="${2:?--measurements needs a file}"
      [[ "${measurements}" == /* ]] || measurements="${invoked_from}/${measurements}"
      shift 2 ;;
    -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
    *) echo "regenerate-references: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n "${keep}" && ${check} -eq 0 ]]; then
  echo "regenerate-references: --keep ${keep}: only with --check (without it the plans are written" \
    "to data/reference/)" >&2
  exit 2
fi
case "${only}" in
  ""|stories260k|smollm2-135m|gemma3-270m) ;;
  *) echo "regenerate-references: --only ${only}: expected stories260k, smollm2-135m or" \
       "gemma3-270m" >&2
     exit 2 ;;
esac
budgets() {  # MODEL: the reference budgets, bytes per token; the first one is tuned
  case "$1" in
    stories260k) echo "320 360" ;;
    smollm2-135m) echo "6480 12240 5760" ;;
    gemma3-270m) echo "5184 9792" ;;
  esac
}
if [[ -n "${budget_only}" ]]; then
  if [[ -z "${only}" || ${reports_only} -eq 1 ]]; then
    echo "regenerate-references: --budget ${budget_only}: only with --only MODEL, not with" \
      "--reports-only" >&2
    exit 2
  fi
  if [[ " $(budgets "${only}") " != *" ${budget_only} "* ]]; then
    echo "regenerate-references: --budget ${budget_only}: ${only}'s budgets are" \
      "$(budgets "${only}")" >&2
    exit 2
  fi
fi
[[ -x "${kvplan}" ]] ||
  { echo "regenerate-references: ${kvplan} not built (scripts/setup/build.sh)" >&2; exit 2; }
# References are made by the default build, whose plans any x86-64-v3 CPU reproduces bit for bit
# (docs/determinism.md); a -march=native build's plans are its own machine's.
readonly reference_isa="x86-64-v3"
build_line="$("${kvplan}" --version)"
compare_flags=()
if [[ "${build_line}" != *"-march=${reference_isa}:"* ]]; then
  if [[ ${check} -eq 0 && ${reports_only} -eq 0 ]]; then
    echo "regenerate-references: ${kvplan} is '${build_line}'; references are made by the default" \
      "-DKVPLAN_ISA=${reference_isa} build" >&2
    exit 2
  fi
  echo "regenerate-references: warning: ${build_line}, not -march=${reference_isa}: plans may" \
    "differ from the committed ones by the build alone; --check accepts a plan whose advantage" \
    "over its best uniform pair stays inside the committed paired-bootstrap interval" >&2
  compare_flags=(--accept-within-interval)
fi

model_file() {
  case "$1" in
    stories260k) echo "${models_dir}/stories260K.gguf" ;;
    smollm2-135m) scripts/models/fetch-smollm2.sh >&2; echo "${cache}/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    gemma3-270m) scripts/models/fetch-gemma3.sh >&2; echo "${cache}/gemma-3-270m-q4_k_m.gguf" ;;
  esac
}

# Extra flags of the searches after the first budget (none today: every budget runs the
# defaults `tune` uses).
search_flags() {  # MODEL
  case "$1" in
    *) echo "" ;;
  esac
}

# One profile (tune at the first budget) and a plan per budget from it; with --budget only that
# budget's plan (the profile by `kvplan profile` when the budget is not the first).
make_plans() {  # MODEL OUT_DIR
  local name="$1" out="$2" model first="" budget
  local cells="${measurements:-${out}/measurements.jsonl}"
  model="$(model_file "${name}")"
  [[ -f "${model}" ]] || { echo "regenerate-references: ${model} is missing" >&2; exit 2; }
  for budget in $(budgets "${name}"); do
    local wanted=1
    [[ -z "${budget_only}" || "${budget_only}" == "${budget}" ]] || wanted=0
    if [[ -z "${first}" ]]; then
      first="${budget}"
      if [[ ${wanted} -eq 1 ]]; then
        "${kvplan}" tune --model "${model}" --max-bytes-per-token "${budget}" \
          -o "${out}/plan-${budget}.json" --profile-out "${out}/profile.json" \
          --measurements "${cells}"
      else
        "${kvplan}" profile --model "${model}" -o "${out}/profile.json"
      fi
    elif [[ ${wanted} -eq 1 ]]; then
      # shellcheck disable=SC2046  # the flags are words
      "${kvplan}" search --profile "${out}/profile.json" --model "${model}" \
        --max-bytes-per-token "${budget}" $(search_flags "${name}") -o "${out}/plan-${budget}.json" \
        --measurements "${cells}"
    fi
  done
}

make_reports() {  # MODEL DIR [BUDGET]: report-<bytes>.html/.md from DIR/profile.json and
  # DIR/plan-<bytes>.json, every budget's or BUDGET's
  local name="$1" dir="$2" format budget
  for budget in ${3:-$(budgets "${name}")}; do
    for format in html md; do
      "${kvplan}" -q report --profile "${dir}/profile.json" --plan "${dir}/plan-${budget}.json" \
        "${report_flags[@]}" --format "${format}" -o "${dir}/report-${budget}.${format}"
    done
  done
}

status=0
for name in stories260k smollm2-135m gemma3-270m; do
  [[ -z "${only}" || "${only}" == "${name}" ]] || continue
  dir="data/reference/${name}"
  start=${SECONDS}
  echo "== ${name}"
  # Per-KV-head plans (data/reference/<model>/per-head/, made as its README says): their reports
  # are rendered and checked like the others; the plans themselves are not regenerated here.
  per_head="${dir}/per-head"
  if [[ ${reports_only} -eq 1 ]]; then
    make_reports "${name}" "${dir}"
    [[ -d "${per_head}" ]] && make_reports "${name}" "${per_head}"
  elif [[ ${check} -eq 0 && -n "${budget_only}" ]]; then
    tmp="$(mktemp -d)"
    make_plans "${name}" "${tmp}"
    # The new plan must record the profile the other committed plans record.
    recorded_hash() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["provenance"]["profile"]["hash"])' "$1"; }
    new_hash="$(recorded_hash "${tmp}/plan-${budget_only}.json")"
    for plan in "${dir}"/plan-*.json; do
      [[ "$(basename "${plan}")" == "plan-${budget_only}.json" ]] && continue
      if [[ "$(recorded_hash "${plan}")" != "${new_hash}" ]]; then
        echo "regenerate-references: the profile made today (${new_hash}) is not the one" \
          "${plan} records: regenerate every budget of ${name} (without --budget)" >&2
        rm -rf "${tmp}"
        exit 1
      fi
    done
    make_reports "${name}" "${tmp}" "${budget_only}"
    cp "${tmp}/plan-${budget_only}.json" "${tmp}/report-${budget_only}".* "${dir}/"
    rm -rf "${tmp}"
  elif [[ ${check} -eq 0 ]]; then
    tmp="$(mktemp -d)"
    make_plans "${name}" "${tmp}"
    make_reports "${name}" "${tmp}"
    mkdir -p "${dir}"
    rm -f "${dir}"/plan*.json "${dir}"/report*.html "${dir}"/report*.md
    cp "${tmp}"/*.json "${tmp}"/report-* "${dir}/"
    rm -rf "${tmp}"
  else
    tmp="$(mktemp -d)"
    # The committed reports must be what the command writes today from the committed inputs.
    cp "${dir}/profile.json" "${dir}"/plan-*.json "${tmp}/"
    make_reports "${name}" "${tmp}"
    for report in "${tmp}"/report-*; do
      if ! cmp -s "${report}" "${dir}/$(basename "${report}")"; then
        echo "regenerate-references: ${dir}/$(basename "${report}") is stale (run --reports-only)" >&2
        status=1
      fi
    done
    if [[ -d "${per_head}" ]]; then
      mkdir -p "${tmp}/per-head"
      cp "${per_head}/profile.json" "${per_head}"/plan-*.json "${tmp}/per-head/"
      make_reports "${name}" "${tmp}/per-head"
      for report in "${tmp}/per-head"/report-*; do
        if ! cmp -s "${report}" "${per_head}/$(basename "${report}")"; then
          echo "regenerate-references: ${per_head}/$(basename "${report}") is stale" \
            "(run --reports-only)" >&2
          status=1
        fi
      done
      rm -rf "${tmp}/per-head"
    fi
    # A plan regenerated from scratch must match the committed one within the tolerance.
    rm -f "${tmp}"/*.json
    make_plans "${name}" "${tmp}"
    for plan in "${tmp}"/plan*.json; do
      scripts/ci/compare-plans.py --kl-tolerance "${kl_tolerance}" "${compare_flags[@]}" \
        "${dir}/$(basename "${plan}")" "${plan}" || status=1
    done
    if [[ -n "${keep}" ]]; then
      mkdir -p "${keep}/${name}"
      cp "${tmp}"/*.json "${keep}/${name}/"
    fi
    rm -rf "${tmp}"
  fi
  echo "== ${name}: $((SECONDS - start)) s"
done
exit ${status}
