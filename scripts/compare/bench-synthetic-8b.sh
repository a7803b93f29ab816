#!/usr/bin/env bash
# The harness on a model of Llama-3.1-8B's size and layout: writes (once, into the cache) a GGUF of
# random Q4_K weights with that shape (scripts/fixtures/synthetic-gguf.py, gguf-py from PyPI in a
# venv of its own), then runs kvplan_bench_forward on it: a prefill of KVPLAN_BENCH_CTX (512) tokens and a few
# decoded ones, printing tokens/s beside an Eigen GEMM rate and memcpy bandwidth measured in the
# same run, and the peak resident memory beside the size of the weights as stored.
#
#   scripts/compare/bench-synthetic-8b.sh
#   KVPLAN_BENCH_THREADS=2 KVPLAN_BENCH_CTX=512 scripts/compare/bench-synthetic-8b.sh
#
# Environment: KVPLAN_BUILD_DIR (default build), KVPLAN_CACHE (default ~/.cache/kvplan). Needs
# about 4.7 GB of disk for the model and python3 with venv. The weights are random: the model's
# tokens mean nothing, only its size and shapes are real.
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
bench="${KVPLAN_BUILD_DIR:-build}/tests/model/kvplan_bench_forward"
threads="${KVPLAN_BENCH_THREADS:-$(nproc)}"
ctx="${KVPLAN_BENCH_CTX:-512}"
model="${cache}/synthetic-llama3.1-8b-q4_k.gguf"
venv="${cache}/gguf-venv"
gguf_py_version="0.19.0"

die() { echo "bench-synthetic-8b: error: $*" >&2; exit 2; }
[[ -x "${bench}" ]] || die "${bench} not built (scripts/setup/build.sh)"

if [[ ! -f "${model}" ]]; then
  mkdir -p "${cache}"
  if [[ ! -x "${venv}/bin/python" ]] || ! "${venv}/bin/python" -c "import gguf" 2>/dev/null; then
    python3 -m venv "${venv}" || die "python3 -m venv failed (apt-get install python3-venv)"
    "${venv}/bin/pip" install --quiet "gguf==${gguf_py_version}" || die "pip install gguf failed"
  fi
  echo "bench-synthetic-8b: writing ${model} (random Q4_K weights, about 4.7 GB)" >&2
  "${venv}/bin/python" scripts/fixtures/synthetic-gguf.py "${model}.partial"
  mv "${model}.partial" "${model}"
fi

echo "model file  $(du -h --apparent-size "${model}" | cut -f1) (${model})"
"${bench}" --model "${model}" --threads "${threads}" --ctx "${ctx}" --decode 4 --repeats 1
