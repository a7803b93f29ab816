#!/usr/bin/env bash
# The Python test tools' venv in the kvplan cache ($KVPLAN_CACHE, default ~/.cache/kvplan/hf-venv,
# the one scripts/fixtures/make-hf-fixtures.sh adds torch and transformers to): the official
# `openai` client that tests/server drives `kvplan serve` with, pinned. Idempotent; needs PyPI only
# the first time.
#
#   scripts/setup/python-venv.sh
set -euo pipefail
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
venv="${cache}/hf-venv"
openai_version="3.63.0"
if [[ ! -x "${venv}/bin/python" ]]; then
  mkdir -p "${cache}"
  python3 -m venv "${venv}"
fi
if ! "${venv}/bin/python" -c "import openai, sys; sys.exit(openai.__version__ != '${openai_version}')" \
    2>/dev/null; then
  "${venv}/bin/pip" install -q "openai==${openai_version}"
fi
echo "python-venv: ${venv} has openai ${openai_version}"
