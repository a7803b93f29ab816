# Build options and the warning/codegen flags every kvplan target shares.
option(KVPLAN_WERROR "Treat warnings as errors (CI turns this on)" OFF)
# The instruction set every target is compiled for. Results are bit-identical on any CPU that runs
# the same build (docs/determinism.md), so the default is a fixed level, not the build machine's:
# `-march=native` lets the compiler pick vector widths and tuning per CPU model, and two machines
# then choose different plans. "native" builds for this machine only (faster on AVX-512 CPUs,
# measured in docs/determinism.md); "" keeps the compiler's default.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(_kvplan_default_isa "x86-64-v3")
else()
  set(_kvplan_default_isa "")
endif()
set(KVPLAN_ISA "${_kvplan_default_isa}" CACHE STRING
    "-march for every target: x86-64-v3 (default on x86-64), x86-64-v2, native, or '' (compiler default)")
option(KVPLAN_BUILD_TESTS "Build GoogleTest tests" ON)
option(KVPLAN_BUILD_BENCHMARKS "Build Google Benchmark programs" ON)
# The Python extension (src/python): needs Python headers and nanobind in the Python CMake finds
# (Python_EXECUTABLE); pyproject.toml turns it on for `pip install .`.
option(KVPLAN_PYTHON "Build the kvplan Python extension module" OFF)
set(KVPLAN_SANITIZE "" CACHE STRING "Sanitizers: '', 'address;undefined' or 'thread'")
# libFuzzer targets in tests/fuzz (clang only; scripts/ci/fuzz.sh): the libraries are compiled with
# -fsanitize=fuzzer-no-link,address,undefined and each target links -fsanitize=fuzzer.
option(KVPLAN_FUZZ "Build tests/fuzz as libFuzzer targets instead of replay tests (clang)" OFF)
set(KVPLAN_HIP "OFF" CACHE STRING "GPU backend: OFF, AMD (hipcc) or NVIDIA (nvcc through src/kernels/gpu_compat.h)")
set_property(CACHE KVPLAN_HIP PROPERTY STRINGS OFF AMD NVIDIA)

# Code generation flags every target (libraries, tests, tools) must share.
add_library(kvplan_build_flags INTERFACE)
target_compile_options(kvplan_build_flags INTERFACE
  # Quantized codes must be bit-identical between CPU and GPU builds: forbid the compiler from
  # fusing a*b+c into an FMA, which changes rounding.
  -ffp-contract=off
  # Honour `omp simd` reductions (src/formats/kv_format_math.h) without the OpenMP runtime.
  -fopenmp-simd)

# Warnings for kvplan's own library and tool sources (tests use a lighter set).
add_library(kvplan_warnings INTERFACE)
target_compile_options(kvplan_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  # GCC 12 reports false -Wrestrict positives inside libstdc++ string concatenation (GCC PR 105329).
  $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>
  # ... and false -Wmaybe-uninitialized inside Eigen's AVX-512 intrinsics (-march with AVX-512).
  $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
if(KVPLAN_WERROR)
  target_compile_options(kvplan_warnings INTERFACE -Werror)
endif()
if(KVPLAN_ISA)
  target_compile_options(kvplan_build_flags INTERFACE -march=${KVPLAN_ISA})
endif()
# core/build_record.cpp writes it into plan.json and profile.json.
target_compile_definitions(kvplan_build_flags INTERFACE KVPLAN_ISA="${KVPLAN_ISA}")
if(KVPLAN_SANITIZE)
  list(JOIN KVPLAN_SANITIZE "," _kvplan_san)
  target_compile_options(kvplan_build_flags INTERFACE -fsanitize=${_kvplan_san} -fno-omit-frame-pointer
                                                      -fno-sanitize-recover=all)
  target_link_options(kvplan_build_flags INTERFACE -fsanitize=${_kvplan_san})
  # GCC 12 + ASan + AVX-512: false -Wuninitialized inside GCC's own intrinsics header
  # (`__m512 __Y = __Y;` of _mm512_undefined_ps, reached through Eigen's ptranspose).
  target_compile_options(kvplan_build_flags INTERFACE $<$<CXX_COMPILER_ID:GNU>:-Wno-uninitialized>)
endif()

if(KVPLAN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KVPLAN_FUZZ=ON needs clang (libFuzzer), e.g. CXX=clang++-14")
  endif()
  target_compile_options(kvplan_build_flags INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(kvplan_build_flags INTERFACE -fsanitize=address,undefined)
endif()

# kvplan_add_library(name SOURCES ... DEPS ...): one static library per module folder.
function(kvplan_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC kvplan_build_flags ${ARG_DEPS} PRIVATE kvplan_warnings ${ARG_PRIVATE_DEPS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# GPU kernels (KVPLAN_HIP=AMD|NVIDIA): toolchain logic in cmake/KvplanHip.cmake.
include(KvplanHip)
