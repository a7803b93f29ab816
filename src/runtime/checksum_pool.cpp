#include "runtime/checksum_pool.h"

#include <algorithm>
#include <atomic>

#include "core/hash.h"
#include "runtime/stored_object.h"

namespace kvplan {

struct ChecksumPool::Job {
  const std::byte* data = nullptr;
  size_t bytes = 0;
  size_t blocks = 0;
  uint64_t* out = nullptr;
  std::atomic<size_t> next_block{0};  // next block to claim
  std::mutex mu;
  std::condition_variable done_cv;
  size_t done_blocks = 0;  // guarded by mu
};

ChecksumPool::ChecksumPool(unsigned threads) {
  workers_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ChecksumPool::~ChecksumPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ChecksumPool::work_on(Job& job) {
  size_t hashed = 0;
  for (;;) {
    const size_t b = job.next_block.fetch_add(1, std::memory_order_relaxed);
    if (b >= job.blocks) break;
    const size_t off = b * kChecksumBlockBytes;
    job.out[b] = hash64({job.data + off, std::min(kChecksumBlockBytes, job.bytes - off)});
    ++hashed;
  }
  if (hashed == 0) return false;
  std::lock_guard<std::mutex> lock(job.mu);
  job.done_blocks += hashed;
  if (job.done_blocks != job.blocks) return false;
  job.done_cv.notify_all();
  return true;
}

void ChecksumPool::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    // Every block of the oldest job gets claimed by someone before the job leaves the queue;
    // whoever claims past the end takes it out.
    std::shared_ptr<Job> job = queue_.front();
    lock.unlock();
    work_on(*job);
    lock.lock();
    if (!queue_.empty() && queue_.front() == job) queue_.pop_front();
  }
}

ChecksumPool::Pending ChecksumPool::start(const std::byte* data, size_t n, uint64_t* out) {
  auto job = std::make_shared<Job>();
  job->data = data;
  job->bytes = n;
  job->blocks = checksum_block_count(n);
  job->out = out;
  if (job->blocks > 0 && !workers_.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(job);
    }
    work_cv_.notify_all();
  }
  return Pending(this, std::move(job));
}

void ChecksumPool::wait_for(const std::shared_ptr<Job>& job) {
  work_on(*job);
  {
    std::unique_lock<std::mutex> lock(job->mu);
    job->done_cv.wait(lock, [&] { return job->done_blocks == job->blocks; });
  }
  // The job may still sit in the queue when the caller claimed its last blocks.
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = std::find(queue_.begin(), queue_.end(), job);
  if (it != queue_.end()) queue_.erase(it);
}

uint64_t ChecksumPool::checksum(const std::byte* data, size_t n) {
  return checksum_while(data, n, [] {});
}

uint64_t ChecksumPool::checksum_while(const std::byte* data, size_t n,
                                      const std::function<void()>& work) {
  std::vector<uint64_t> blocks(checksum_block_count(n));
  Pending hashing = start(data, n, blocks.data());
  work();
  hashing.wait();
  return combine_block_hashes(blocks, n);
}

ChecksumPool::Pending& ChecksumPool::Pending::operator=(Pending&& other) noexcept {
  if (this != &other) {
    wait();
    pool_ = other.pool_;
    job_ = std::move(other.job_);
    other.pool_ = nullptr;
  }
  return *this;
}

ChecksumPool::Pending::~Pending() {
  wait();
}

void ChecksumPool::Pending::wait() {
  if (job_ == nullptr) return;
  pool_->wait_for(job_);
  job_.reset();
}

unsigned default_checksum_threads() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp(cores / 2, 1u, 8u);
}

}  // namespace kvplan
