# GPU kernels (src/kernels/*.hip) for KVPLAN_HIP=AMD (hipcc) or NVIDIA (nvcc, the same sources through
# src/kernels/gpu_compat.h). All toolchain logic lives here; the rest of the build sees one static
# library, kvplan_kernels, and the variable KVPLAN_GPU_ENABLED.
#
# Compilers are called from add_custom_command rather than CMake's HIP/CUDA languages: Debian 12's
# HIP needs half a dozen hand-set variables for enable_language(HIP) (ARCHITECTURE §4), and one
# rule for both compilers keeps the flags that matter for bit-identical codes side by side:
# no FMA contraction (-ffp-contract=off / --fmad=false), IEEE division and denormals (defaults).
#
#   cmake -B build-hip  -DKVPLAN_HIP=AMD    [-DKVPLAN_HIP_ARCHITECTURES="gfx90a;gfx940"]
#   cmake -B build-cuda -DKVPLAN_HIP=NVIDIA [-DCMAKE_CUDA_ARCHITECTURES=90]
set(KVPLAN_GPU_ENABLED OFF)
if(KVPLAN_HIP STREQUAL "OFF" OR NOT KVPLAN_HIP)
  return()
endif()
if(NOT KVPLAN_HIP MATCHES "^(AMD|NVIDIA)$")
  message(FATAL_ERROR "KVPLAN_HIP must be OFF, AMD or NVIDIA; got '${KVPLAN_HIP}'")
endif()

set(_kvplan_kernel_dir ${PROJECT_SOURCE_DIR}/src/kernels)
set(_kvplan_kernel_sources gpu_runtime.hip kv_pack.hip kv_attention.hip)
file(GLOB _kvplan_kernel_headers CONFIGURE_DEPENDS ${_kvplan_kernel_dir}/*.h
     ${PROJECT_SOURCE_DIR}/src/formats/*.h ${PROJECT_SOURCE_DIR}/src/formats/math/*.h)
set(_kvplan_common_flags -O3 -std=c++20 -DNDEBUG -I${PROJECT_SOURCE_DIR}/src)

if(KVPLAN_HIP STREQUAL "AMD")
  find_program(KVPLAN_HIPCC hipcc REQUIRED)
  set(KVPLAN_HIP_ARCHITECTURES "gfx90a;gfx940" CACHE STRING
      "AMD GPU targets (clang 15 knows gfx90a and gfx940, not gfx942)")
  find_library(KVPLAN_AMDHIP64 amdhip64 REQUIRED)
  set(_kvplan_compiler ${KVPLAN_HIPCC})
  set(_kvplan_flags ${_kvplan_common_flags} -x hip -fPIC -ffp-contract=off
                    -Wall -Wno-unused-command-line-argument)
  foreach(arch IN LISTS KVPLAN_HIP_ARCHITECTURES)
    list(APPEND _kvplan_flags --offload-arch=${arch})
  endforeach()
  set(_kvplan_gpu_link ${KVPLAN_AMDHIP64})
  set(_kvplan_gpu_define KVPLAN_GPU_AMD=1)
else()
  find_program(KVPLAN_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin REQUIRED)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "NVIDIA GPU architectures (90 = H100/H200)")
  endif()
  get_filename_component(_kvplan_cuda_root ${KVPLAN_NVCC} DIRECTORY)
  get_filename_component(_kvplan_cuda_root ${_kvplan_cuda_root} DIRECTORY)
  set(CUDAToolkit_ROOT ${_kvplan_cuda_root})
  find_package(CUDAToolkit REQUIRED)
  set(_kvplan_compiler ${KVPLAN_NVCC})
  set(_kvplan_flags ${_kvplan_common_flags} -x cu --fmad=false -Xcompiler=-fPIC,-Wall)
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX REPLACE "-(real|virtual)$" "" arch ${arch})
    list(APPEND _kvplan_flags -gencode=arch=compute_${arch},code=sm_${arch})
  endforeach()
  set(_kvplan_gpu_link CUDA::cudart)
  set(_kvplan_gpu_define KVPLAN_GPU_NVIDIA=1)
endif()

set(_kvplan_objects)
foreach(src IN LISTS _kvplan_kernel_sources)
  set(obj ${PROJECT_BINARY_DIR}/kernels/${src}.o)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/kernels
    COMMAND ${_kvplan_compiler} ${_kvplan_flags} -c ${_kvplan_kernel_dir}/${src} -o ${obj}
    DEPENDS ${_kvplan_kernel_dir}/${src} ${_kvplan_kernel_headers}
    COMMENT "${KVPLAN_HIP} kernels: ${src}"
    VERBATIM)
  list(APPEND _kvplan_objects ${obj})
endforeach()
set_source_files_properties(${_kvplan_objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
add_library(kvplan_kernels STATIC ${_kvplan_objects})
set_target_properties(kvplan_kernels PROPERTIES LINKER_LANGUAGE CXX)
target_include_directories(kvplan_kernels INTERFACE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(kvplan_kernels INTERFACE ${_kvplan_gpu_link})
target_compile_definitions(kvplan_kernels INTERFACE ${_kvplan_gpu_define})
set(KVPLAN_GPU_ENABLED ON)
message(STATUS "kvplan: GPU kernels for ${KVPLAN_HIP} with ${_kvplan_compiler}")
