# Builds llama.cpp's llama-perplexity, llama-simple and llama-bench once into the kvplan cache,
# from the llama.cpp source the PyPI sdist llama-cpp-python==0.3.36 carries (vendor/llama.cpp),
# verified by the sdist's sha256. A benchmark and comparison tool only: never a dependency of kvplan.
#
# Sourced by scripts that define die() and cache; sets llama_bin ($KVPLAN_LLAMACPP_BIN, a directory
# holding binaries already built from that source, skips the download and build).
readonly SDIST_VERSION="0.3.36"
readonly SDIST_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
llama_src="${cache}/llama.cpp-${SDIST_VERSION}"
llama_bin="${KVPLAN_LLAMACPP_BIN:-${llama_src}/build/bin}"

build_llamacpp() {
  [[ -x "${llama_bin}/llama-perplexity" && -x "${llama_bin}/llama-simple" &&
    -x "${llama_bin}/llama-bench" ]] && return 0
  local work
  work=$(mktemp -d "${cache}/.llama.cpp.XXXXXX")
  if [[ ! -f "${llama_src}/CMakeLists.txt" ]]; then
    echo "build-llamacpp: fetching llama-cpp-python==${SDIST_VERSION} (sdist, 77 MB)" >&2
    python3 -m pip download --no-deps --no-binary=:all: --dest "${work}" \
      "llama-cpp-python==${SDIST_VERSION}" >"${work}/pip.log" 2>&1 ||
      { cat "${work}/pip.log" >&2; die "pip download llama-cpp-python failed"; }
    local sdist="${work}/llama_cpp_python-${SDIST_VERSION}.tar.gz"
    [[ "$(sha256sum "${sdist}" | cut -d' ' -f1)" == "${SDIST_SHA256}" ]] ||
      die "${sdist}: sha256 differs from ${SDIST_SHA256}"
    tar -xzf "${sdist}" -C "${work}"
    rm -rf "${llama_src}"
    mv "${work}/llama_cpp_python-${SDIST_VERSION}/vendor/llama.cpp" "${llama_src}"
  fi
  echo "build-llamacpp: building llama-perplexity, llama-simple and llama-bench (a few minutes)" >&2
  # ggml's native build turns on its AMX path wherever the CPU lists AMX, but a virtual machine
  # may not grant a process the tile state, and the first matmul then dies on ldtilecfg.
  local no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  cmake -S "${llama_src}" -B "${llama_src}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="${no_amx}" -DCMAKE_CXX_FLAGS="${no_amx}" \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >"${work}/cmake.log" 2>&1 ||
    { cat "${work}/cmake.log" >&2; die "cmake of llama.cpp failed"; }
  cmake --build "${llama_src}/build" -j "$(nproc)" \
    --target llama-perplexity llama-simple llama-bench >"${work}/build.log" 2>&1 ||
    { tail -30 "${work}/build.log" >&2; die "building llama.cpp failed"; }
  rm -rf "${work}"
}
