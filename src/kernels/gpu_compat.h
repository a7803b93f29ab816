// The HIP runtime API kvplan's .hip files use, for both compilers. Under hipcc it is HIP itself;
// under nvcc (KVPLAN_HIP=NVIDIA) each hip* name below is a small inline function or alias over
// its CUDA equivalent. Only what kvplan calls is listed — add a name here when a kernel needs it;
// this is not a wholesale mapping of one API onto the other (Debian's HIP-on-NVIDIA headers do not
// build with CUDA 13, so kvplan owns this list). Include only from .hip files.
//
//   KVPLAN_GPU_CHECK(hipMalloc(&p, bytes));   // returns a failed kvplan::gpu::Status from the
//   caller
#pragma once

#include "kernels/gpu_runtime.h"

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#include <cuda_runtime.h>

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipMemcpyKind = cudaMemcpyKind;

inline constexpr hipError_t hipSuccess = cudaSuccess;
inline constexpr hipError_t hipErrorNoDevice = cudaErrorNoDevice;
inline constexpr hipError_t hipErrorInsufficientDriver = cudaErrorInsufficientDriver;
inline constexpr hipMemcpyKind hipMemcpyHostToDevice = cudaMemcpyHostToDevice;
inline constexpr hipMemcpyKind hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
inline constexpr hipMemcpyKind hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;

inline const char* hipGetErrorString(hipError_t e) {
  return cudaGetErrorString(e);
}
inline hipError_t hipGetLastError() {
  return cudaGetLastError();
}
inline hipError_t hipGetDeviceCount(int* n) {
  return cudaGetDeviceCount(n);
}
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d) {
  return cudaGetDeviceProperties(p, d);
}
inline hipError_t hipSetDevice(int d) {
  return cudaSetDevice(d);
}
inline hipError_t hipMalloc(void** p, size_t n) {
  return cudaMalloc(p, n);
}
inline hipError_t hipFree(void* p) {
  return cudaFree(p);
}
inline constexpr unsigned hipHostMallocDefault = cudaHostAllocDefault;
inline hipError_t hipHostMalloc(void** p, size_t n, unsigned flags) {
  return cudaHostAlloc(p, n, flags);
}
inline hipError_t hipHostFree(void* p) {
  return cudaFreeHost(p);
}
inline hipError_t hipMemcpyAsync(void* dst, const void* src, size_t n, hipMemcpyKind kind,
                                 hipStream_t s) {
  return cudaMemcpyAsync(dst, src, n, kind, s);
}
inline hipError_t hipMemsetAsync(void* p, int v, size_t n, hipStream_t s) {
  return cudaMemsetAsync(p, v, n, s);
}
inline hipError_t hipStreamCreate(hipStream_t* s) {
  return cudaStreamCreate(s);
}
inline hipError_t hipStreamDestroy(hipStream_t s) {
  return cudaStreamDestroy(s);
}
inline hipError_t hipStreamSynchronize(hipStream_t s) {
  return cudaStreamSynchronize(s);
}
inline hipError_t hipEventCreate(hipEvent_t* e) {
  return cudaEventCreate(e);
}
inline hipError_t hipEventDestroy(hipEvent_t e) {
  return cudaEventDestroy(e);
}
inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
  return cudaEventRecord(e, s);
}
inline hipError_t hipEventSynchronize(hipEvent_t e) {
  return cudaEventSynchronize(e);
}
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) {
  return cudaEventElapsedTime(ms, a, b);
}
#else
#error "src/kernels/gpu_compat.h is for .hip files compiled by hipcc or nvcc"
#endif

namespace kvplan::gpu {

// "No device" (no GPU, or no driver for one) is the signal to fall back to the CPU, not a failure.
inline Status device_error(hipError_t e, const char* call) {
  const bool no_device = e == hipErrorNoDevice || e == hipErrorInsufficientDriver;
  return {no_device ? StatusCode::kNoDevice : StatusCode::kDeviceError, static_cast<int>(e),
          hipGetErrorString(e), call};
}

}  // namespace kvplan::gpu

// Evaluates a hip* call; on failure returns its Status (naming the call) from the enclosing
// function, which must return kvplan::gpu::Status.
#define KVPLAN_GPU_CHECK(call)                                                                     \
  do {                                                                                             \
    const hipError_t kvplan_gpu_err_ = (call);                                                     \
    if (kvplan_gpu_err_ != hipSuccess) return ::kvplan::gpu::device_error(kvplan_gpu_err_, #call); \
  } while (0)

// After a kernel launch: returns the launch error, if any, naming the kernel.
#define KVPLAN_GPU_CHECK_LAUNCH(kernel_name)                            \
  do {                                                                  \
    const hipError_t kvplan_gpu_err_ = hipGetLastError();               \
    if (kvplan_gpu_err_ != hipSuccess)                                  \
      return ::kvplan::gpu::device_error(kvplan_gpu_err_, kernel_name); \
  } while (0)
