#!/usr/bin/env bash
# The best plan each serving engine can run at one budget, next to kvplan's own (issue 16): one
# profile of every format, then `kvplan search --engine E` per engine on it, each plan's export,
# the report of kvplan's plan with the per-engine table (`kvplan report --engine-plans`) in
# OUT/engines/report-engines-BUDGET.{md,html}, and each plan's layers and export in
# OUT/engines/engines-BUDGET.md (scripts/compare/engine-table.py).
#
#   scripts/compare/engine-table.sh      # SmolLM2-135M at 6480 B/token -> data/reference/smollm2-135m
#   scripts/compare/engine-table.sh --model M.gguf --budget 6480 --out DIR
#
# Every search measures its plan and the uniform baselines on the report text (never used to
# choose); about 5-10 minutes per engine on 2 cores, after a profile of 1-3 minutes. Files already
# in OUT/engines (the profile, a plan) are kept: delete them to compute them again. An engine with
# no configuration within the budget (vLLM TurboQuant keeps four layers at 16 bits) is recorded
# with the search's reason, and its best plan at the least bytes it can take is searched and
# measured instead (plan-ENGINE-least.json), outside the report's table.
set -euo pipefail
cd "$(dirname "$0")/../.."
kvplan="${KVPLAN_BUILD_DIR:-build}/kvplan"
model="" budget=6480 out="data/reference/smollm2-135m"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "engine-table: unknown argument $1 (expected --model, --budget, --out)" >&2; exit 2 ;;
  esac
done
if [[ -z "${model}" ]]; then
  scripts/models/fetch-smollm2.sh >&2
  model="${HOME}/.cache/kvplan/SmolLM2-135M-Instruct.Q4_1.gguf"
fi
[[ -x "${kvplan}" ]] || { echo "engine-table: ${kvplan} not built (scripts/setup/build.sh)" >&2; exit 2; }
work="${out}/engines"
mkdir -p "${work}"
profile="${work}/profile-all-formats.json"
[[ -f "${profile}" ]] || "${kvplan}" -q profile --model "${model}" --formats all -o "${profile}"
engines=(kvplan llamacpp ik-llamacpp vllm vllm-turboquant trtllm modelopt hf)
args=() plans=()
for engine in "${engines[@]}"; do
  plan="${work}/plan-${engine}-${budget}.json"
  plans+=("${plan}")
  echo "engine-table: ${engine}" >&2
  # Long-context KL is left out: the table compares the engines on the report windows.
  refused="${work}/refused-${engine}-${budget}.txt"
  if [[ ! -f "${plan}" && ! -f "${refused}" ]]; then
    if ! "${kvplan}" -q search --profile "${profile}" --model "${model}" \
      --max-bytes-per-token "${budget}" --engine "${engine}" --long-context-tokens 0 \
      -o "${plan}" > "${work}/search-${engine}-${budget}.txt" 2> "${refused}.tmp"; then
      grep -q "the smallest possible plan takes" "${refused}.tmp" || { cat "${refused}.tmp" >&2; exit 1; }
      grep "error:" "${refused}.tmp" | sed 's/^kvplan: error: //' > "${refused}"
    fi
    rm -f "${refused}.tmp"
  fi
  entry="${engine}"
  if [[ -f "${refused}" ]]; then
    # The least bytes the engine can take, as the search reported them.
    least="$(sed -n 's/.*the smallest possible plan takes \([0-9.]*\) bytes per token.*/\1/p' "${refused}")"
    plan="${work}/plan-${engine}-least.json"
    [[ -f "${plan}" ]] || "${kvplan}" -q search --profile "${profile}" --model "${model}" \
      --max-bytes-per-token "${least}" --engine "${engine}" --long-context-tokens 0 \
      -o "${plan}" > "${work}/search-${engine}-least.txt"
    unset 'plans[${#plans[@]}-1]'
    entry="${engine}@${refused}"
  fi
  if [[ "${engine}" == kvplan ]]; then
    args+=("${entry}=${plan}")
    continue
  fi
  export_txt="${work}/export-${engine}-${budget}.txt"
  mapped="${work}/mapped-${engine}-${budget}.json"
  "${kvplan}" export --plan "${plan}" --to "${engine}" -o "${export_txt}" \
    2> "${work}/export-${engine}-${budget}.notes.txt"
  # kvplan's own plan as this engine would run it: the nearest configuration, measured; an
  # engine that stores none of its formats refuses it (an empty file, "refused" in the table).
  "${kvplan}" -q export --plan "${work}/plan-kvplan-${budget}.json" --to "${engine}" --measure \
    --profile "${profile}" --model "${model}" --json > "${mapped}" \
    || echo "engine-table: kvplan's plan does not map to ${engine}" >&2
  args+=("${entry}=${plan}:${export_txt}:${mapped}")
done
engine_plans="$(IFS=,; echo "${plans[*]}")"
for format in md html; do
  "${kvplan}" -q report --profile "${profile}" --plan "${work}/plan-kvplan-${budget}.json" \
    --engine-plans "${engine_plans}" --format "${format}" \
    -o "${work}/report-engines-${budget}.${format}"
done
{
  echo "# Best plan per serving engine at ${budget} B/token"
  echo
  echo "Model: \`$(basename "${model}")\`. One profile of every format kvplan packs"
  echo "(\`kvplan profile --formats all\`), then"
  echo "\`kvplan search --engine E --max-bytes-per-token ${budget}\` per engine: the search keeps"
  echo "only the formats the engine stores and the per-layer structure it takes"
  echo "(docs/engines.md). The table of the plans, measured on the report text (which"
  echo "chooses nothing) against the best uniform configuration of any format, is the section"
  echo "\"Plans per serving engine\" of [report-engines-${budget}.md](report-engines-${budget}.md)"
  echo "(the report of kvplan's own plan on the same profile). Regenerate with"
  echo "\`scripts/compare/engine-table.sh\`."
  echo
  scripts/compare/engine-table.py "${args[@]}"
} > "${work}/engines-${budget}.md.tmp"
mv "${work}/engines-${budget}.md.tmp" "${work}/engines-${budget}.md"
echo "engine-table: wrote ${work}/engines-${budget}.md and report-engines-${budget}.{md,html}" >&2
