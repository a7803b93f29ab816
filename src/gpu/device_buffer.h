// One allocation of GPU memory, freed when the owner goes out of scope (src/kernels/gpu_runtime.h
// malloc_device / free_device). The single RAII device buffer of kvplan: failures are reported
// through gpu_error.h, so every owner words an allocation failure the same way.
//
//   gpu::DeviceBuffer q(q_bytes, "profile on the GPU: Q");        // throws on failure
//   check_gpu(gpu::copy_to_device(q.data(), host, q_bytes, stream), "upload Q");
//   float* scores = scratch.reserve<float>(n, "scores");           // grows, reused across calls
#pragma once

#include <cstddef>
#include <string_view>

#include "kernels/gpu_runtime.h"

namespace kvplan::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` (nothing for 0). Throws Error (gpu_error.h check_gpu_allocation) naming
  // `what` and the size when the device cannot provide them.
  DeviceBuffer(size_t bytes, std::string_view what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  [[nodiscard]] void* data() const { return ptr_; }
  [[nodiscard]] size_t size() const { return bytes_; }
  template <class T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(ptr_);
  }

  // At least `bytes` of device memory, reusing the allocation when it is large enough; a larger
  // request frees the old one first (its contents are not kept). Throws as the constructor.
  void* reserve(size_t bytes, std::string_view what);
  template <class T>
  T* reserve(size_t count, std::string_view what) {
    return static_cast<T*>(reserve(count * sizeof(T), what));
  }

  // Frees the memory now and returns free_device's status; the destructor frees too but, as a
  // destructor cannot report, ignores it.
  Status reset();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kvplan::gpu
