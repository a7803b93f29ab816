// The one seam between the runtime and a GPU API. The runtime allocates device memory, page-locked
// host memory and moves bytes only through DeviceBackend; a HIP (or CUDA, via
// src/kernels/gpu_compat.h) backend implements it with hipMalloc / hipHostMalloc / hipMemcpyAsync
// on a dedicated transfer stream and hipEvent fences. Without HIP (KVPLAN_HIP=OFF) the host
// stand-in below serves: device memory is ordinary host memory, copies are memcpy, fences complete
// at once — the same interface, so every tier, header and eviction path is exercised on a CPU-only
// machine.
//
//   std::shared_ptr<kvplan::DeviceBackend> b = kvplan::make_default_device_backend();
//   void* dev = b->allocate_device(1 << 20);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "gpu/device_selection.h"

namespace kvplan {

class ChecksumPool;

// A point on a producer's stream after which its writes to device memory are visible. Opaque to
// the runtime; the host stand-in's fences are always complete.
struct DeviceFence {
  void* stream = nullptr;
  uint64_t token = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;

  // Throws Error(kResourceExhausted) naming the size when memory is not available.
  virtual std::byte* allocate_device(size_t bytes) = 0;
  virtual void free_device(std::byte* p, size_t bytes) = 0;
  // Page-locked host memory. Throws Error(kResourceExhausted) when the pages cannot be pinned:
  // the runtime never falls back to pageable memory.
  virtual std::byte* allocate_pinned(size_t bytes) = 0;
  virtual void free_pinned(std::byte* p, size_t bytes) = 0;

  // Copies issued by a transfer worker on its own stream; they return when the bytes have landed.
  virtual void copy_device_to_host(std::byte* host, const std::byte* device, size_t n) = 0;
  virtual void copy_host_to_device(std::byte* device, const std::byte* host, size_t n) = 0;
  // The same copies, also returning payload_checksum (stored_object.h) of the bytes moved, hashed
  // with the help of `pool` (its threads hash while the bytes move). By default the host side is
  // hashed while the copy runs (host -> device) or once it has landed (device -> host).
  virtual uint64_t copy_device_to_host_checksum(std::byte* host, const std::byte* device, size_t n,
                                                ChecksumPool& pool);
  virtual uint64_t copy_host_to_device_checksum(std::byte* device, const std::byte* host, size_t n,
                                                ChecksumPool& pool);
  // Hashing threads worth running next to this backend's transfers (RuntimeOptions::hash_threads
  // = -1): 0 where one thread hashes while it copies at memory speed (the host stand-in).
  [[nodiscard]] virtual unsigned preferred_checksum_threads() const = 0;

  // Records a fence after the work queued so far on `producer_stream` (nullptr = default stream);
  // a store waits on it before reading the producer's pages.
  virtual DeviceFence record_fence(void* producer_stream) = 0;
  virtual void wait_fence(const DeviceFence& fence) = 0;
};

// The host stand-in's name(), exactly: callers (the C API's KVPLAN_BACKEND_HOST) compare with it
// to tell that "device" memory is ordinary host memory.
inline constexpr std::string_view kHostStandinBackendName = "host";

struct HostStandinOptions {
  // Lock the host tier's pages (mlock), as a GPU's DMA needs. A CPU harness serving from host
  // memory copies the tier with memcpy and may leave it pageable: a choice made by the caller, not
  // a fallback (RLIMIT_MEMLOCK is often a few MiB).
  bool lock_host_pages = true;
};

// Host memory standing in for device memory (a build without GPU support, or no GPU found).
std::shared_ptr<DeviceBackend> make_host_standin_backend(HostStandinOptions options = {});
// The backend this build and machine provide: GPU 0 when built with HIP (or CUDA) and a device is
// found (make_gpu_device_backend, gpu_device_backend.h), else the host stand-in; one log line
// says which.
std::shared_ptr<DeviceBackend> make_default_device_backend();
// The backend for a --device request: kAuto as make_default_device_backend, kCpu the host
// stand-in, kGpu that GPU or Error with select_device's reason (kUnimplemented without GPU support
// compiled in, kNotFound without a device, kInvalidArgument for an index out of range).
std::shared_ptr<DeviceBackend> make_device_backend(const DeviceRequest& request);

// mmap + mlock; Error(kResourceExhausted) with the errno text and the RLIMIT_MEMLOCK hint when the
// kernel refuses to lock the pages. Shared by the host stand-in and tests.
std::byte* allocate_locked_pages(size_t bytes);
void free_locked_pages(std::byte* p, size_t bytes);

}  // namespace kvplan
