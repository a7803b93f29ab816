#!/usr/bin/env bash
# A real browser renders a kvplan report: `kvplan report` on the committed stories260K reference,
# then headless Chromium (Debian's `chromium`) takes a screenshot and dumps the rendered DOM;
# check_rendered_report.py fails on any console message, a blank or mis-sized screenshot, or
# missing / empty SVG charts. To prove the checks can fail, a deliberately broken copy of the page
# (a script error, one chart removed) must be rejected too.
#
#   tests/report/browser_test.sh build/kvplan .     # exit 0 pass, 1 fail, 77 skip (no chromium)
set -euo pipefail

kvplan="$1"
source_dir="$2"
here="$(cd "$(dirname "$0")" && pwd)"
readonly width=1280 height=2000 charts=4

browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "${browser}" ]]; then
  echo "SKIP: chromium is not installed (scripts/setup/install-deps.sh installs it)"
  exit 77
fi
"${browser}" --version 2>/dev/null || true

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
reference="${source_dir}/data/reference/stories260k"
"${kvplan}" -q report --profile "${reference}/profile.json" --plan "${reference}/plan-320.json" \
  -o "${work}/report.html"

# Chromium as root needs --no-sandbox; a private profile and HOME keep runs independent, and
# nothing may reach the network; /dev/shm is small in containers. Console messages go to stderr
# through --enable-logging.
run_chromium() {  # URL, then extra flags; stdout is the page's output (DOM), stderr the log
  local url="$1"
  shift
  HOME="${work}/home" timeout 120 "${browser}" --headless --no-sandbox --disable-gpu \
    --disable-background-networking --disable-component-update --disable-sync \
    --disable-default-apps --no-first-run --no-default-browser-check --disable-dev-shm-usage \
    --user-data-dir="${work}/chromium-profile" --enable-logging=stderr --v=0 \
    --window-size="${width},${height}" "$@" "${url}"
}

render_and_check() {  # NAME: renders ${work}/NAME.html and checks it
  local name="$1" url="file://${work}/$1.html"
  mkdir -p "${work}/home"
  run_chromium "${url}" --screenshot="${work}/${name}.png" >/dev/null 2>"${work}/${name}.shot.log"
  run_chromium "${url}" --dump-dom >"${work}/${name}.dom.html" 2>"${work}/${name}.dom.log"
  python3 "${here}/check_rendered_report.py" "${work}/${name}.png" "${work}/${name}.dom.html" \
    "${work}/${name}.shot.log" "${work}/${name}.dom.log" --charts "${charts}" \
    --width "${width}" --height "${height}"
}

echo "== the report"
render_and_check report

echo "== a deliberately broken copy (must be rejected)"
python3 - "${work}/report.html" "${work}/broken.html" <<'PY'
import re, sys
html = open(sys.argv[1], encoding="utf-8").read()
html = re.sub(r"<svg\b.*?</svg>", "", html, count=1, flags=re.S)
html = html.replace("</body>", "<script>undefinedReportFunction();</script>\n</body>")
open(sys.argv[2], "w", encoding="utf-8").write(html)
PY
if render_and_check broken; then
  echo "FAIL: the checks accepted a page with a script error and a missing chart"
  exit 1
fi
echo "PASS: the report renders in Chromium without console messages, with ${charts} charts"
