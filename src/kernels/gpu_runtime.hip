// src/kernels/gpu_runtime.h over HIP (or CUDA through gpu_compat.h): every call checked, every failure
// returned as a Status naming the call.
#include "kernels/gpu_compat.h"

#include <cstring>

namespace kvplan::gpu {
namespace {
hipStream_t as_stream(Stream s) {
  return static_cast<hipStream_t>(s);
}
hipEvent_t as_event(Event e) {
  return static_cast<hipEvent_t>(e);
}
}  // namespace

const char* backend_name() {
#if defined(__HIPCC__)
  return "HIP (AMD)";
#else
  return "CUDA (NVIDIA)";
#endif
}

bool compiled_in() {
  return true;
}

Status device_count(int* count) {
  *count = 0;
  const hipError_t e = hipGetDeviceCount(count);
  if (e != hipSuccess) {
    *count = 0;
    (void)hipGetLastError();  // clear the sticky error the failed query leaves
    return device_error(e, "hipGetDeviceCount");
  }
  if (*count == 0) return {StatusCode::kNoDevice, 0, "no GPU found", "hipGetDeviceCount"};
  return ok_status();
}

Status device_info(int device, DeviceInfo* info) {
  hipDeviceProp_t prop{};
  KVPLAN_GPU_CHECK(hipGetDeviceProperties(&prop, device));
  std::strncpy(info->name, prop.name, sizeof info->name - 1);
  info->name[sizeof info->name - 1] = '\0';
  info->total_memory = prop.totalGlobalMem;
  info->multiprocessors = prop.multiProcessorCount;
  info->major = prop.major;
  info->minor = prop.minor;
  return ok_status();
}

Status set_device(int device) {
  KVPLAN_GPU_CHECK(hipSetDevice(device));
  return ok_status();
}

Status malloc_device(void** ptr, size_t bytes) {
  KVPLAN_GPU_CHECK(hipMalloc(ptr, bytes));
  return ok_status();
}

Status free_device(void* ptr) {
  KVPLAN_GPU_CHECK(hipFree(ptr));
  return ok_status();
}

Status copy_to_device(void* dst, const void* src, size_t bytes, Stream stream) {
  KVPLAN_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, as_stream(stream)));
  return ok_status();
}

Status copy_to_host(void* dst, const void* src, size_t bytes, Stream stream) {
  KVPLAN_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, as_stream(stream)));
  return ok_status();
}

Status copy_device_to_device(void* dst, const void* src, size_t bytes, Stream stream) {
  KVPLAN_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, as_stream(stream)));
  return ok_status();
}

Status memset_device(void* ptr, int value, size_t bytes, Stream stream) {
  KVPLAN_GPU_CHECK(hipMemsetAsync(ptr, value, bytes, as_stream(stream)));
  return ok_status();
}

Status malloc_pinned_host(void** ptr, size_t bytes) {
  KVPLAN_GPU_CHECK(hipHostMalloc(ptr, bytes, hipHostMallocDefault));
  return ok_status();
}

Status free_pinned_host(void* ptr) {
  KVPLAN_GPU_CHECK(hipHostFree(ptr));
  return ok_status();
}

Status stream_create(Stream* stream) {
  hipStream_t s = nullptr;
  KVPLAN_GPU_CHECK(hipStreamCreate(&s));
  *stream = s;
  return ok_status();
}

Status stream_destroy(Stream stream) {
  KVPLAN_GPU_CHECK(hipStreamDestroy(as_stream(stream)));
  return ok_status();
}

Status stream_synchronize(Stream stream) {
  KVPLAN_GPU_CHECK(hipStreamSynchronize(as_stream(stream)));
  return ok_status();
}

Status last_error() {
  KVPLAN_GPU_CHECK(hipGetLastError());
  return ok_status();
}

Status event_create(Event* event) {
  hipEvent_t e = nullptr;
  KVPLAN_GPU_CHECK(hipEventCreate(&e));
  *event = e;
  return ok_status();
}

Status event_destroy(Event event) {
  KVPLAN_GPU_CHECK(hipEventDestroy(as_event(event)));
  return ok_status();
}

Status event_record(Event event, Stream stream) {
  KVPLAN_GPU_CHECK(hipEventRecord(as_event(event), as_stream(stream)));
  return ok_status();
}

Status event_synchronize(Event event) {
  KVPLAN_GPU_CHECK(hipEventSynchronize(as_event(event)));
  return ok_status();
}

Status event_elapsed_ms(Event start, Event stop, float* ms) {
  KVPLAN_GPU_CHECK(hipEventSynchronize(as_event(stop)));
  KVPLAN_GPU_CHECK(hipEventElapsedTime(ms, as_event(start), as_event(stop)));
  return ok_status();
}

}  // namespace kvplan::gpu
