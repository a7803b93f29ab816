// gpu_error.h: the one mapping from a failed gpu::Status to kvplan::Error, checked on Statuses
// made by hand for every code (no GPU needed).
#include "gpu/gpu_error.h"

#include <string>

#include <gtest/gtest.h>

namespace kvplan {
namespace {

// The Error check_gpu throws for `s`; a failure when it throws none.
Error thrown_by(const gpu::Status& s, bool allocation = false) {
  try {
    if (allocation) {
      check_gpu_allocation(s, "device pool", 4096);
    } else {
      check_gpu(s, "profile on the GPU: upload Q");
    }
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for code " << static_cast<int>(s.code);
  return Error(ErrorCode::kInternal, "");
}

TEST(GpuError, OkStatusesPass) {
  EXPECT_NO_THROW(check_gpu(gpu::ok_status(), "anything"));
  EXPECT_NO_THROW(check_gpu_allocation(gpu::ok_status(), "anything", 1));
}

TEST(GpuError, EveryCodeMapsToItsErrorCode) {
  using gpu::StatusCode;
  EXPECT_EQ(gpu_error_code(StatusCode::kInvalidArgument), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu_error_code(StatusCode::kUnimplemented), ErrorCode::kUnimplemented);
  EXPECT_EQ(gpu_error_code(StatusCode::kNotCompiled), ErrorCode::kUnimplemented);
  EXPECT_EQ(gpu_error_code(StatusCode::kNoDevice), ErrorCode::kNotFound);
  EXPECT_EQ(gpu_error_code(StatusCode::kDeviceError), ErrorCode::kInternal);
}

TEST(GpuError, MessageSaysWhatWasDoneTheCallAndTheReason) {
  const gpu::Status not_compiled{gpu::StatusCode::kNotCompiled, 0,
                                 "no GPU support compiled in (KVPLAN_HIP=OFF)", "copy_to_device"};
  const Error a = thrown_by(not_compiled);
  EXPECT_EQ(a.code(), ErrorCode::kUnimplemented);
  EXPECT_STREQ(a.what(),
               "profile on the GPU: upload Q: copy_to_device failed: no GPU support compiled in "
               "(KVPLAN_HIP=OFF)");
  // A HIP/CUDA failure carries the API's own code, so it can be looked up.
  const gpu::Status device{gpu::StatusCode::kDeviceError, 719, "unspecified launch failure",
                           "hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, s)"};
  const Error b = thrown_by(device);
  EXPECT_EQ(b.code(), ErrorCode::kInternal);
  EXPECT_STREQ(b.what(),
               "profile on the GPU: upload Q: hipMemcpyAsync(dst, src, bytes, "
               "hipMemcpyHostToDevice, s) failed: unspecified launch failure (GPU error 719)");
}

TEST(GpuError, AllocationFailuresAreResourceExhaustedAndNameTheSize) {
  const gpu::Status oom{gpu::StatusCode::kDeviceError, 2, "out of memory", "hipMalloc(ptr, bytes)"};
  const Error e = thrown_by(oom, true);
  EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
  EXPECT_STREQ(
      e.what(),
      "device pool: hipMalloc(ptr, bytes) of 4096 bytes failed: out of memory (GPU error 2)");
  // Without a GPU backend it is still "unimplemented", not "out of memory".
  const gpu::Status none{gpu::StatusCode::kNotCompiled, 0, "no GPU support compiled in",
                         "malloc_device"};
  EXPECT_EQ(thrown_by(none, true).code(), ErrorCode::kUnimplemented);
}

}  // namespace
}  // namespace kvplan
