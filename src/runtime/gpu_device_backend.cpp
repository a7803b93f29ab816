#include "runtime/gpu_device_backend.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "gpu/gpu_error.h"
#include "kernels/gpu_runtime.h"
#include "runtime/checksum_pool.h"
#include "runtime/stored_object.h"

namespace kvplan {
namespace {

class GpuDeviceBackend final : public DeviceBackend {
 public:
  explicit GpuDeviceBackend(int device) : device_(device) {
    check_gpu(gpu::set_device(device), "GPU device backend");
    gpu::DeviceInfo info;
    check_gpu(gpu::device_info(device, &info), "GPU device backend");
    name_ = std::string(gpu::backend_name()) + " device " + std::to_string(device) + " (" +
            info.name + ")";
  }

  ~GpuDeviceBackend() override {
    for (gpu::Stream s : streams_) (void)gpu::stream_destroy(s);
  }

  [[nodiscard]] std::string_view name() const override { return name_; }

  std::byte* allocate_device(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    check_gpu_allocation(gpu::malloc_device(&p, bytes), "device pool", bytes);
    return static_cast<std::byte*>(p);
  }
  void free_device(std::byte* p, size_t) override {
    if (p != nullptr) (void)gpu::free_device(p);
  }

  // hipHostMalloc pins the pages or fails; the failure is reported, never replaced by pageable
  // memory (which would turn every transfer into a staged copy).
  std::byte* allocate_pinned(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    check_gpu_allocation(gpu::malloc_pinned_host(&p, bytes),
                         "pinned host tier (kvplan does not fall back to pageable memory)", bytes);
    return static_cast<std::byte*>(p);
  }
  void free_pinned(std::byte* p, size_t) override {
    if (p != nullptr) (void)gpu::free_pinned_host(p);
  }

  void copy_device_to_host(std::byte* host, const std::byte* device, size_t n) override {
    StreamLease stream(*this);
    check_gpu(gpu::copy_to_host(host, device, n, stream.get()), "device->host transfer");
    check_gpu(gpu::stream_synchronize(stream.get()), "device->host transfer");
  }
  void copy_host_to_device(std::byte* device, const std::byte* host, size_t n) override {
    StreamLease stream(*this);
    check_gpu(gpu::copy_to_device(device, host, n, stream.get()), "host->device transfer");
    check_gpu(gpu::stream_synchronize(stream.get()), "host->device transfer");
  }
  // Device memory is not readable from the host, so checksums hash the pinned host side, on the
  // pool's threads while the DMA runs: device -> host lands in pieces, each hashed while the next
  // one moves; host -> device hashes the source while the DMA reads it. A mismatch found after
  // the bytes landed is harmless: the runtime refuses the load and never publishes the slot.
  uint64_t copy_device_to_host_checksum(std::byte* host, const std::byte* device, size_t n,
                                        ChecksumPool& pool) override {
    StreamLease stream(*this);
    std::vector<uint64_t> blocks(checksum_block_count(n));
    EventList landed;
    for (size_t off = 0; off < n; off += kHashPieceBytes) {
      const size_t m = std::min(kHashPieceBytes, n - off);
      check_gpu(gpu::copy_to_host(host + off, device + off, m, stream.get()),
                "device->host transfer");
      landed.record_on(stream.get());
    }
    std::vector<ChecksumPool::Pending> hashing;
    for (size_t i = 0, off = 0; off < n; ++i, off += kHashPieceBytes) {
      check_gpu(gpu::event_synchronize(landed.at(i)), "device->host transfer");
      hashing.push_back(pool.start(host + off, std::min(kHashPieceBytes, n - off),
                                   blocks.data() + off / kChecksumBlockBytes));
    }
    for (ChecksumPool::Pending& h : hashing) h.wait();
    return combine_block_hashes(blocks, n);
  }
  uint64_t copy_host_to_device_checksum(std::byte* device, const std::byte* host, size_t n,
                                        ChecksumPool& pool) override {
    StreamLease stream(*this);
    const uint64_t sum = pool.checksum_while(host, n, [&] {
      check_gpu(gpu::copy_to_device(device, host, n, stream.get()), "host->device transfer");
    });
    check_gpu(gpu::stream_synchronize(stream.get()), "host->device transfer");
    return sum;
  }
  [[nodiscard]] unsigned preferred_checksum_threads() const override {
    return default_checksum_threads();
  }

  // An event recorded on the producer's stream now; the transfer worker waits for it before it
  // reads the pages, so a store never copies half-written KV. Runs on the caller's thread, whose
  // current device is the producer stream's: it is left as it is (no hidden set_device).
  DeviceFence record_fence(void* producer_stream) override {
    gpu::Event e = nullptr;
    check_gpu(gpu::event_create(&e), "store fence");
    const gpu::Status s = gpu::event_record(e, producer_stream);
    if (!s.ok()) {
      (void)gpu::event_destroy(e);
      check_gpu(s, "store fence");
    }
    return {producer_stream, reinterpret_cast<uint64_t>(e)};
  }
  void wait_fence(const DeviceFence& fence) override {
    auto* e = reinterpret_cast<gpu::Event>(fence.token);
    if (e == nullptr) return;
    const gpu::Status s = gpu::event_synchronize(e);
    (void)gpu::event_destroy(e);
    check_gpu(s, "store fence");
  }

 private:
  // Device -> host copies are cut into pieces this size (whole checksum blocks) so hashing can
  // start before the whole payload has landed.
  static constexpr size_t kHashPieceBytes = 32 * kChecksumBlockBytes;

  // Events recorded after each piece of a transfer, destroyed with the list.
  class EventList {
   public:
    EventList() = default;
    EventList(const EventList&) = delete;
    EventList& operator=(const EventList&) = delete;
    ~EventList() {
      for (gpu::Event e : events_) (void)gpu::event_destroy(e);
    }
    void record_on(gpu::Stream stream) {
      gpu::Event e = nullptr;
      check_gpu(gpu::event_create(&e), "transfer event");
      events_.push_back(e);
      check_gpu(gpu::event_record(e, stream), "transfer event");
    }
    [[nodiscard]] gpu::Event at(size_t i) const { return events_.at(i); }

   private:
    std::vector<gpu::Event> events_;
  };

  // Transfer workers run concurrently; each copy borrows a stream of its own so one worker's
  // synchronize never waits on another's transfer.
  class StreamLease {
   public:
    explicit StreamLease(GpuDeviceBackend& b) : b_(b) {
      std::lock_guard<std::mutex> lock(b_.mu_);
      if (!b_.free_streams_.empty()) {
        stream_ = b_.free_streams_.back();
        b_.free_streams_.pop_back();
        return;
      }
      check_gpu(gpu::set_device(b_.device_), "transfer stream");
      check_gpu(gpu::stream_create(&stream_), "transfer stream");
      b_.streams_.push_back(stream_);
    }
    ~StreamLease() {
      std::lock_guard<std::mutex> lock(b_.mu_);
      b_.free_streams_.push_back(stream_);
    }
    StreamLease(const StreamLease&) = delete;
    StreamLease& operator=(const StreamLease&) = delete;
    [[nodiscard]] gpu::Stream get() const { return stream_; }

   private:
    GpuDeviceBackend& b_;
    gpu::Stream stream_ = nullptr;
  };

  int device_;
  std::string name_;
  std::mutex mu_;
  std::vector<gpu::Stream> streams_;       // every stream created, destroyed with the backend
  std::vector<gpu::Stream> free_streams_;  // those not lent out
};

}  // namespace

std::shared_ptr<DeviceBackend> make_gpu_device_backend(int device) {
  if (!gpu::compiled_in()) {
    fail(ErrorCode::kUnimplemented,
         "GPU device backend: no GPU support compiled in (build with -DKVPLAN_HIP=AMD or NVIDIA)");
  }
  int count = 0;
  check_gpu(gpu::device_count(&count), "GPU device backend");
  if (device < 0 || device >= count) {
    fail(ErrorCode::kInvalidArgument, "GPU device backend: device {} requested, {} found", device,
         count);
  }
  return std::make_shared<GpuDeviceBackend>(device);
}

}  // namespace kvplan
