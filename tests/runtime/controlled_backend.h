// A DeviceBackend for tests whose fences and failures the test controls: memory and copies are the
// host stand-in's, but a fence completes only when the test calls complete(token), and the next
// copies or fence waits can be made to throw as a GPU backend's check() does.
//
//   auto b = std::make_shared<kvplan::test::ControlledBackend>();
//   kvplan::DeviceFence f = b->record_fence(nullptr);  // pending
//   rt.store(chunk, f);  ...  b->complete(f.token);
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>

#include "core/error.h"
#include "runtime/device_backend.h"

namespace kvplan::test {

class ControlledBackend final : public DeviceBackend {
 public:
  [[nodiscard]] std::string_view name() const override { return "controlled (test)"; }
  std::byte* allocate_device(size_t bytes) override { return host_->allocate_device(bytes); }
  void free_device(std::byte* p, size_t bytes) override { host_->free_device(p, bytes); }
  std::byte* allocate_pinned(size_t bytes) override { return host_->allocate_pinned(bytes); }
  void free_pinned(std::byte* p, size_t bytes) override { host_->free_pinned(p, bytes); }
  void copy_device_to_host(std::byte* host, const std::byte* device, size_t n) override {
    maybe_fail(fail_device_to_host_, "device->host transfer");
    host_->copy_device_to_host(host, device, n);
  }
  void copy_host_to_device(std::byte* device, const std::byte* host, size_t n) override {
    maybe_fail(fail_host_to_device_, "host->device transfer");
    host_->copy_host_to_device(device, host, n);
  }
  uint64_t copy_device_to_host_checksum(std::byte* host, const std::byte* device, size_t n,
                                        ChecksumPool& pool) override {
    maybe_fail(fail_device_to_host_, "device->host transfer");
    return host_->copy_device_to_host_checksum(host, device, n, pool);
  }
  uint64_t copy_host_to_device_checksum(std::byte* device, const std::byte* host, size_t n,
                                        ChecksumPool& pool) override {
    maybe_fail(fail_host_to_device_, "host->device transfer");
    return host_->copy_host_to_device_checksum(device, host, n, pool);
  }
  [[nodiscard]] unsigned preferred_checksum_threads() const override { return 0; }

  // Token 0 is the default fence (always complete); record_fence hands out pending ones.
  DeviceFence record_fence(void* producer_stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    return {producer_stream, next_token_++};
  }
  void wait_fence(const DeviceFence& fence) override {
    maybe_fail(fail_fence_waits_, "store fence");
    if (fence.token == 0) return;
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return completed_.contains(fence.token); });
    --waiting_;
  }

  void complete(uint64_t token) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      completed_.insert(token);
    }
    changed_.notify_all();
  }
  [[nodiscard]] bool completed(uint64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    return completed_.contains(token);
  }
  // Blocks until some thread waits on a pending fence.
  void await_waiter() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return waiting_ > 0; });
  }

  // The next n copies in that direction (or fence waits) throw Error(kInternal), as the GPU
  // backend does when the driver reports an error.
  void fail_next_device_to_host(int n) { fail_device_to_host_ = n; }
  void fail_next_host_to_device(int n) { fail_host_to_device_ = n; }
  void fail_next_fence_waits(int n) { fail_fence_waits_ = n; }

 private:
  static void maybe_fail(std::atomic<int>& budget, std::string_view what) {
    int left = budget.load();
    while (left > 0 && !budget.compare_exchange_weak(left, left - 1)) {
    }
    if (left > 0) fail(ErrorCode::kInternal, "{}: injected device error", what);
  }

  std::shared_ptr<DeviceBackend> host_ = make_host_standin_backend();
  std::mutex mu_;
  std::condition_variable changed_;
  std::set<uint64_t> completed_;
  uint64_t next_token_ = 1;
  int waiting_ = 0;
  std::atomic<int> fail_device_to_host_{0}, fail_host_to_device_{0}, fail_fence_waits_{0};
};

}  // namespace kvplan::test
