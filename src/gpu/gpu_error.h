// The one bridge from a failed kvplan::gpu::Status (src/kernels/gpu_runtime.h, plain C++ so kernels
// never throw) to kvplan::Error: every caller of the GPU layer maps codes and words its message the
// same way.
//
//   check_gpu(gpu::copy_to_device(d, h, n, stream), "profile on the GPU: upload Q");
//   // throws Error(kInternal, "profile on the GPU: upload Q: copy_to_device failed: out of memory
//   //                          (GPU error 2)")
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/error.h"
#include "kernels/gpu_runtime.h"

namespace kvplan {

// kNotCompiled and kUnimplemented -> kUnimplemented, kNoDevice -> kNotFound, kInvalidArgument ->
// kInvalidArgument, kDeviceError (a HIP/CUDA call failed) -> kInternal.
ErrorCode gpu_error_code(gpu::StatusCode code);

// "<what>: <call> failed: <message>", plus " (GPU error <api_error>)" when the HIP/CUDA call
// returned one, so the raw code can be looked up.
std::string gpu_failure_message(const gpu::Status& s, std::string_view what);

// Throws Error(gpu_error_code(s.code), gpu_failure_message(s, what)) unless `s` is ok.
void check_gpu(const gpu::Status& s, std::string_view what);

// For allocations: as check_gpu, but a failing HIP/CUDA call is reported as kResourceExhausted
// and the message names the size ("<what>: malloc_device of <bytes> bytes failed: ...").
void check_gpu_allocation(const gpu::Status& s, std::string_view what, size_t bytes);

}  // namespace kvplan
