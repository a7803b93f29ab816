# Every dependency is a Debian 12 package installed by scripts/setup/install-deps.sh; nothing is
# fetched.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(OpenMP REQUIRED)
find_package(PkgConfig REQUIRED)
# xxHash: fast, stable 64-bit hashes for fingerprints, chunk keys and payload checksums.
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# PCRE2: Unicode-aware pre-tokenizer regexes (GPT-2 / Llama-3 style patterns).
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# cpp-httplib: the HTTP server of `kvplan serve` (Debian builds it as a shared library with TLS,
# zlib and brotli; its pkg-config flags select the matching header configuration).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
if(KVPLAN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KVPLAN_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
