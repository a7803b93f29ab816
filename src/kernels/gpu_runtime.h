// The thin host-side layer every GPU call of kvplan goes through: device discovery, memory, copies,
// streams and timing events. Plain C++ (no HIP or CUDA types), so tests, the CLI and src/gpu
// compile with the host compiler. Implemented by src/kernels/gpu_runtime.hip in GPU builds
// (KVPLAN_HIP=AMD|NVIDIA) and by src/gpu/gpu_runtime_stub.cpp otherwise, where every call returns
// StatusCode::kNotCompiled.
//
//   int n = 0;
//   kvplan::gpu::Status s = kvplan::gpu::device_count(&n);
//   if (!s.ok()) std::puts(s.message);   // "no GPU support compiled in", "no GPU found", ...
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvplan::gpu {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,  // a launcher's parameters are inconsistent (message says which)
  kUnimplemented,    // valid input the kernels do not support yet
  kNotCompiled,      // this build has no GPU backend (KVPLAN_HIP=OFF)
  kNoDevice,         // the GPU runtime found no device
  kDeviceError,      // a HIP/CUDA call failed (api_error holds its code)
};

// Messages are static strings (HIP/CUDA error strings or literals), so a Status is trivially
// copyable and never allocates.
struct [[nodiscard]] Status {
  StatusCode code = StatusCode::kOk;
  int api_error = 0;         // hipError_t / cudaError_t value for kDeviceError
  const char* message = "";  // what went wrong
  const char* call = "";     // the failing API call or launcher

  [[nodiscard]] bool ok() const { return code == StatusCode::kOk; }
};

inline Status ok_status() {
  return {};
}

using Stream = void*;  // hipStream_t / cudaStream_t; nullptr = the default stream
using Event = void*;

// "HIP (AMD)", "CUDA (NVIDIA)" or "none".
const char* backend_name();
bool compiled_in();

struct DeviceInfo {
  char name[256] = {};
  uint64_t total_memory = 0;
  int multiprocessors = 0;
  int major = 0, minor = 0;  // compute capability / gfx major.minor
};

// kNoDevice (with count 0) when the runtime reports no device — the signal to use the CPU.
Status device_count(int* count);
Status device_info(int device, DeviceInfo* info);
Status set_device(int device);

Status malloc_device(void** ptr, size_t bytes);
Status free_device(void* ptr);
Status copy_to_device(void* dst, const void* src, size_t bytes, Stream stream);
Status copy_to_host(void* dst, const void* src, size_t bytes, Stream stream);
Status copy_device_to_device(void* dst, const void* src, size_t bytes, Stream stream);
Status memset_device(void* ptr, int value, size_t bytes, Stream stream);
// Page-locked host memory the device copies to and from directly (hipHostMalloc / cudaHostAlloc).
Status malloc_pinned_host(void** ptr, size_t bytes);
Status free_pinned_host(void* ptr);

Status stream_create(Stream* stream);
Status stream_destroy(Stream stream);
Status stream_synchronize(Stream stream);
// The last launch error on this thread (launchers check it themselves).
Status last_error();

Status event_create(Event* event);
Status event_destroy(Event event);
Status event_record(Event event, Stream stream);
Status event_synchronize(Event event);  // waits until the work before the event has finished
Status event_elapsed_ms(Event start, Event stop, float* ms);  // waits for `stop`

}  // namespace kvplan::gpu
