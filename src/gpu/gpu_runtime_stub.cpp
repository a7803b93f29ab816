// src/kernels/gpu_runtime.h and src/kernels/kv_kernels.h for builds without a GPU backend
// (KVPLAN_HIP=OFF): every call reports StatusCode::kNotCompiled, so callers take their CPU path.
#include "kernels/gpu_runtime.h"
#include "kernels/kv_kernels.h"

namespace kvplan::gpu {
namespace {
Status not_compiled(const char* call) {
  return {StatusCode::kNotCompiled, 0, "no GPU support compiled in (KVPLAN_HIP=OFF)", call};
}
}  // namespace

const char* backend_name() {
  return "none";
}
bool compiled_in() {
  return false;
}

Status device_count(int* count) {
  *count = 0;
  return not_compiled("device_count");
}
Status device_info(int, DeviceInfo*) {
  return not_compiled("device_info");
}
Status set_device(int) {
  return not_compiled("set_device");
}
Status malloc_device(void** ptr, size_t) {
  *ptr = nullptr;
  return not_compiled("malloc_device");
}
Status free_device(void*) {
  return not_compiled("free_device");
}
Status copy_to_device(void*, const void*, size_t, Stream) {
  return not_compiled("copy_to_device");
}
Status copy_to_host(void*, const void*, size_t, Stream) {
  return not_compiled("copy_to_host");
}
Status copy_device_to_device(void*, const void*, size_t, Stream) {
  return not_compiled("copy_device_to_device");
}
Status memset_device(void*, int, size_t, Stream) {
  return not_compiled("memset_device");
}
Status malloc_pinned_host(void** ptr, size_t) {
  *ptr = nullptr;
  return not_compiled("malloc_pinned_host");
}
Status free_pinned_host(void*) {
  return not_compiled("free_pinned_host");
}
Status stream_create(Stream* stream) {
  *stream = nullptr;
  return not_compiled("stream_create");
}
Status stream_destroy(Stream) {
  return not_compiled("stream_destroy");
}
Status stream_synchronize(Stream) {
  return not_compiled("stream_synchronize");
}
Status last_error() {
  return not_compiled("last_error");
}
Status event_create(Event* event) {
  *event = nullptr;
  return not_compiled("event_create");
}
Status event_destroy(Event) {
  return not_compiled("event_destroy");
}
Status event_record(Event, Stream) {
  return not_compiled("event_record");
}
Status event_synchronize(Event) {
  return not_compiled("event_synchronize");
}
Status event_elapsed_ms(Event, Event, float*) {
  return not_compiled("event_elapsed_ms");
}

Status pack_page(const PackPageParams&, Stream) {
  return not_compiled("pack_page");
}
Status unpack_page(const UnpackPageParams&, Stream) {
  return not_compiled("unpack_page");
}
Status decode_attention(const DecodeAttentionParams&, Stream) {
  return not_compiled("decode_attention");
}
Status batched_attention(const BatchedAttentionParams&, Stream) {
  return not_compiled("batched_attention");
}

}  // namespace kvplan::gpu
