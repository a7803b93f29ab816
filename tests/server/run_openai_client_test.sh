#!/usr/bin/env bash
# Runs openai_client_test.py with the venv's Python. Without the venv or a model it skips (exit 77)
# with the reason — unless KVPLAN_REQUIRE_MODELS=1 (CI), where that fails.
#
#   run_openai_client_test.sh KVPLAN_BINARY MODELS_DIR REPO_ROOT
set -euo pipefail
kvplan="$1"
models="${KVPLAN_TEST_MODELS:-$2}"
repo="$3"
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
python="${cache}/hf-venv/bin/python"
smollm2="${cache}/SmolLM2-135M-Instruct.Q4_1.gguf"
missing=""
[[ -x "${python}" ]] && "${python}" -c "import openai" 2>/dev/null ||
  missing="the openai client (run scripts/setup/python-venv.sh)"
[[ -f "${smollm2}" ]] || missing="${smollm2} (run scripts/models/fetch-smollm2.sh)"
[[ -f "${models}/stories260K.gguf" ]] || missing="${models}/stories260K.gguf"
if [[ -n "${missing}" ]]; then
  if [[ "${KVPLAN_REQUIRE_MODELS:-0}" == 1 ]]; then
    echo "missing ${missing} and KVPLAN_REQUIRE_MODELS=1: failing" >&2
    exit 1
  fi
  echo "skipped: missing ${missing}" >&2
  exit 77
fi
exec "${python}" "${repo}/tests/server/openai_client_test.py" --kvplan "${kvplan}" \
  --stories "${models}/stories260K.gguf" --smollm2 "${smollm2}" --repo "${repo}"
