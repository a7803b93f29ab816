#!/usr/bin/env bash
# The layering of docs/architecture.md holds (scripts/ci/check-layering.py), and the check can
# fail: a copy of src/ with one upward include (formats -> search), one upward link and a module
# folder the table does not list must each be reported.
#
#   tests/layering_test.sh SOURCE_DIR     # exit 0 pass, 1 fail
set -euo pipefail
source_dir="$1"
check="${source_dir}/scripts/ci/check-layering.py"
python3 "${check}" "${source_dir}"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
mkdir -p "${work}/docs"
cp "${source_dir}/docs/architecture.md" "${work}/docs/"
cp -r "${source_dir}/src" "${work}/src"
echo '#include "search/choose_plan.h"' >> "${work}/src/formats/budget.cpp"
sed -i 's/DEPS kvplan_core)/DEPS kvplan_core kvplan_model)/' "${work}/src/formats/CMakeLists.txt"
mkdir -p "${work}/src/unlisted"
if out="$(python3 "${check}" "${work}")"; then
  echo "FAIL: the check passed a tree with an upward include"; exit 1
fi
fail=0
for want in "src/formats/budget.cpp" "links kvplan_model" "src/unlisted/"; do
  grep -q "${want}" <<<"${out}" || { echo "FAIL: not reported: ${want}"; fail=1; }
done
echo "${out}" | tail -4
exit ${fail}
