#include "gpu/device_buffer.h"

#include <utility>

#include "gpu/gpu_error.h"

namespace kvplan::gpu {

DeviceBuffer::DeviceBuffer(size_t bytes, std::string_view what) {
  (void)reserve(bytes, what);
}

DeviceBuffer::~DeviceBuffer() {
  (void)reset();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    (void)reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void* DeviceBuffer::reserve(size_t bytes, std::string_view what) {
  if (bytes <= bytes_) return ptr_;
  check_gpu(reset(), what);
  void* p = nullptr;
  check_gpu_allocation(malloc_device(&p, bytes), what, bytes);
  ptr_ = p;
  bytes_ = bytes;
  return ptr_;
}

Status DeviceBuffer::reset() {
  if (ptr_ == nullptr) return ok_status();
  void* p = std::exchange(ptr_, nullptr);
  bytes_ = 0;
  return free_device(p);
}

}  // namespace kvplan::gpu
