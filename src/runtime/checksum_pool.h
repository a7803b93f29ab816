// Payload checksums computed by several threads. A GPU's DMA engine moves tens of GB/s between
// device and pinned host memory, while one core hashes pinned memory at about a DRAM stream's
// rate; payload checksums hash 64 KiB blocks independently (stored_object.h), so a pool of
// threads can keep up with the DMA and hash while it runs.
//
//   ChecksumPool pool(4);
//   std::vector<uint64_t> blocks(checksum_block_count(n));
//   ChecksumPool::Pending p = pool.start(host, n, blocks.data());   // threads start hashing
//   ... issue the DMA that reads the same bytes ...
//   p.wait();                                                        // caller helps, then waits
//   uint64_t sum = combine_block_hashes(blocks, n);                  // == payload_checksum(host,
//   n)
//
// Any number of threads may start and wait on jobs at once; a pool of 0 threads hashes on the
// waiting caller.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kvplan {

class ChecksumPool {
  struct Job;

 public:
  explicit ChecksumPool(unsigned threads);
  ~ChecksumPool();
  ChecksumPool(const ChecksumPool&) = delete;
  ChecksumPool& operator=(const ChecksumPool&) = delete;

  [[nodiscard]] unsigned threads() const { return static_cast<unsigned>(workers_.size()); }

  // Hashing in progress. wait() hashes blocks no thread has taken yet, then returns when every
  // block is done; the destructor waits too, so `out` and the data outlive the hashing.
  class Pending {
   public:
    Pending() = default;
    Pending(Pending&&) noexcept = default;
    Pending& operator=(Pending&& other) noexcept;
    ~Pending();
    void wait();

   private:
    friend class ChecksumPool;
    Pending(ChecksumPool* pool, std::shared_ptr<Job> job) : pool_(pool), job_(std::move(job)) {}
    ChecksumPool* pool_ = nullptr;
    std::shared_ptr<Job> job_;
  };

  // Starts hashing the checksum blocks of the n bytes at `data` (a payload, or a part of one that
  // starts on a block boundary) into out[0 .. checksum_block_count(n)).
  [[nodiscard]] Pending start(const std::byte* data, size_t n, uint64_t* out);
  // payload_checksum(data, n), hashed by the pool and the caller.
  [[nodiscard]] uint64_t checksum(const std::byte* data, size_t n);
  // The same, the pool hashing while the caller runs `work` (a copy that reads the same bytes),
  // then helping; returns once both are done.
  [[nodiscard]] uint64_t checksum_while(const std::byte* data, size_t n,
                                        const std::function<void()>& work);

 private:
  // Hashes unclaimed blocks of `job` until none is left; true when this call finished the job.
  static bool work_on(Job& job);
  void worker_loop();
  void wait_for(const std::shared_ptr<Job>& job);

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<std::shared_ptr<Job>> queue_;  // jobs with blocks left to claim, oldest first
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// A sensible pool size for hashing next to a GPU's transfers: half the cores, at most 8.
unsigned default_checksum_threads();

}  // namespace kvplan
