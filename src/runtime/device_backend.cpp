#include "runtime/device_backend.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"
#include "core/stream_copy.h"
#include "gpu/device_selection.h"
#include "runtime/checksum_pool.h"
#include "runtime/gpu_device_backend.h"
#include "runtime/stored_object.h"

namespace kvplan {

uint64_t DeviceBackend::copy_device_to_host_checksum(std::byte* host, const std::byte* device,
                                                     size_t n, ChecksumPool& pool) {
  copy_device_to_host(host, device, n);
  return pool.checksum(host, n);
}

uint64_t DeviceBackend::copy_host_to_device_checksum(std::byte* device, const std::byte* host,
                                                     size_t n, ChecksumPool& pool) {
  // Hash the source: device memory is not readable from the host on a real GPU.
  return pool.checksum_while(host, n, [&] { copy_host_to_device(device, host, n); });
}

std::byte* allocate_locked_pages(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fail(ErrorCode::kResourceExhausted, "pinned host tier: mmap of {} bytes failed: {}", bytes,
         std::strerror(errno));
  }
  if (::mlock(p, bytes) != 0) {
    const int err = errno;
    ::munmap(p, bytes);
    struct rlimit lim {};
    ::getrlimit(RLIMIT_MEMLOCK, &lim);
    fail(ErrorCode::kResourceExhausted,
         "pinned host tier: mlock of {} bytes failed: {} (RLIMIT_MEMLOCK is {} bytes; raise it "
         "with `ulimit -l` or run with CAP_IPC_LOCK, or lower the host capacity) — kvplan does not "
         "fall back to pageable memory",
         bytes, std::strerror(err),
         lim.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : std::to_string(lim.rlim_cur));
  }
  return static_cast<std::byte*>(p);
}

void free_locked_pages(std::byte* p, size_t bytes) {
  if (p == nullptr) return;
  ::munlock(p, bytes);
  ::munmap(p, bytes);
}

namespace {

class HostStandinBackend final : public DeviceBackend {
 public:
  explicit HostStandinBackend(HostStandinOptions options) : options_(options) {}
  [[nodiscard]] std::string_view name() const override { return kHostStandinBackendName; }
  std::byte* allocate_device(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) {
      fail(ErrorCode::kResourceExhausted, "device pool: cannot allocate {} bytes", bytes);
    }
    return static_cast<std::byte*>(p);
  }
  void free_device(std::byte* p, size_t) override { std::free(p); }
  std::byte* allocate_pinned(size_t bytes) override {
    return options_.lock_host_pages ? allocate_locked_pages(bytes) : allocate_pageable(bytes);
  }
  void free_pinned(std::byte* p, size_t bytes) override {
    if (options_.lock_host_pages) {
      free_locked_pages(p, bytes);
    } else if (p != nullptr) {
      ::munmap(p, bytes);
    }
  }
  // Neither side is read again soon after a transfer, so both directions stream past the cache.
  void copy_device_to_host(std::byte* host, const std::byte* device, size_t n) override {
    copy_nontemporal(host, device, n);
    fence_nontemporal_stores();
  }
  void copy_host_to_device(std::byte* device, const std::byte* host, size_t n) override {
    copy_nontemporal(device, host, n);
    fence_nontemporal_stores();
  }
  // Without hashing threads one pass copies and hashes each piece while it is in cache; with
  // them the pool hashes the source while this thread copies it.
  uint64_t copy_device_to_host_checksum(std::byte* host, const std::byte* device, size_t n,
                                        ChecksumPool& pool) override {
    return copy_and_checksum(host, device, n, pool);
  }
  uint64_t copy_host_to_device_checksum(std::byte* device, const std::byte* host, size_t n,
                                        ChecksumPool& pool) override {
    return copy_and_checksum(device, host, n, pool);
  }
  [[nodiscard]] unsigned preferred_checksum_threads() const override { return 0; }
  DeviceFence record_fence(void* producer_stream) override { return {producer_stream, 0}; }
  void wait_fence(const DeviceFence&) override {}

 private:
  static std::byte* allocate_pageable(size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      fail(ErrorCode::kResourceExhausted, "host tier: mmap of {} bytes failed: {}", bytes,
           std::strerror(errno));
    }
    return static_cast<std::byte*>(p);
  }
  static uint64_t copy_and_checksum(std::byte* dst, const std::byte* src, size_t n,
                                    ChecksumPool& pool) {
    if (pool.threads() == 0) return copy_with_checksum(dst, src, n);
    return pool.checksum_while(src, n, [&] {
      copy_nontemporal(dst, src, n);
      fence_nontemporal_stores();
    });
  }

  HostStandinOptions options_;
};

}  // namespace

std::shared_ptr<DeviceBackend> make_host_standin_backend(HostStandinOptions options) {
  return std::make_shared<HostStandinBackend>(options);
}

std::shared_ptr<DeviceBackend> make_default_device_backend() {
  return make_device_backend({});
}

std::shared_ptr<DeviceBackend> make_device_backend(const DeviceRequest& request) {
  // The --device rule of the CLI: auto takes a GPU when this build has GPU support and the runtime
  // finds one (select_device logs which), else host memory stands in for the device.
  const DeviceChoice choice = select_device(request);
  if (choice.use_gpu) return make_gpu_device_backend(choice.index);
  return make_host_standin_backend();
}

}  // namespace kvplan
