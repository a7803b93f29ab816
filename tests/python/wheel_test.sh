#!/usr/bin/env bash
# The README's Python command on a clean venv: `pip install .` builds the wheel from the checkout
# (scikit-build-core + nanobind from PyPI, the C++ libraries from the same CMake targets), then the
# package imports and runs outside the build tree (test_api.py against the wheel). With ccache (the
# tests' build uses it, scripts/setup/build.sh) the wheel's libraries are the build's objects.
#
#   wheel_test.sh PYTHON REPO_ROOT KVPLAN_BINARY [CXX]
set -euo pipefail
python="$1"
repo="$2"
kvplan="$3"
# The build's compiler by the same name: ccache keys on it.
if [[ -n "${4:-}" ]]; then export CXX="$4"; fi
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
"${python}" -m venv "${work}/venv"
venv_python="${work}/venv/bin/python"
if command -v ccache >/dev/null; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
# -Werror as the tests' build compiles, so that ccache sees the same command lines.
"${work}/venv/bin/pip" install -q "${repo}" --config-settings=cmake.define.KVPLAN_WERROR=ON
"${work}/venv/bin/pip" install -q pytest==9.2.0
cd "${work}"
"${venv_python}" - <<'PY'
import pathlib
import kvplan
where = pathlib.Path(kvplan.__file__).parent
assert "site-packages" in str(where), where
assert (where / "configs" / "calibration" / "default.jsonl").is_file()
assert (where / "_kvplan.pyi").is_file() and (where / "py.typed").is_file()  # typed package
print(f"kvplan {kvplan.__version__} from {where}: {len(kvplan.formats())} formats")
PY
# The API tests against the installed wheel (no PYTHONPATH into the build tree).
env -u PYTHONPATH KVPLAN_BINARY="${kvplan}" KVPLAN_SOURCE_DIR="${repo}" PYTHONDONTWRITEBYTECODE=1 \
  "${venv_python}" -m pytest -q -p no:cacheprovider "${repo}/tests/python/test_api.py"
