#include "gpu/gpu_error.h"

#include <fmt/format.h>

namespace kvplan {
namespace {

std::string api_suffix(const gpu::Status& s) {
  return s.api_error != 0 ? fmt::format(" (GPU error {})", s.api_error) : std::string();
}

}  // namespace

ErrorCode gpu_error_code(gpu::StatusCode code) {
  switch (code) {
    case gpu::StatusCode::kInvalidArgument:
      return ErrorCode::kInvalidArgument;
    case gpu::StatusCode::kUnimplemented:
    case gpu::StatusCode::kNotCompiled:
      return ErrorCode::kUnimplemented;
    case gpu::StatusCode::kNoDevice:
      return ErrorCode::kNotFound;
    case gpu::StatusCode::kOk:  // not an error; only reached by a caller's bug
    case gpu::StatusCode::kDeviceError:
      break;
  }
  return ErrorCode::kInternal;
}

std::string gpu_failure_message(const gpu::Status& s, std::string_view what) {
  return fmt::format("{}: {} failed: {}{}", what, s.call, s.message, api_suffix(s));
}

void check_gpu(const gpu::Status& s, std::string_view what) {
  if (s.ok()) return;
  throw Error(gpu_error_code(s.code), gpu_failure_message(s, what));
}

void check_gpu_allocation(const gpu::Status& s, std::string_view what, size_t bytes) {
  if (s.ok()) return;
  const ErrorCode code = s.code == gpu::StatusCode::kDeviceError ? ErrorCode::kResourceExhausted
                                                                 : gpu_error_code(s.code);
  throw Error(code, fmt::format("{}: {} of {} bytes failed: {}{}", what, s.call, bytes, s.message,
                                api_suffix(s)));
}

}  // namespace kvplan
