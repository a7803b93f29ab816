#include "runtime/transfer_worker.h"

#include <exception>

#include <spdlog/spdlog.h>

namespace kvplan {

TransferWorker::TransferWorker() : thread_([this] { run(); }) {}

TransferWorker::~TransferWorker() {
  stop();
}

void TransferWorker::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void TransferWorker::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void TransferWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

uint64_t TransferWorker::failed_jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_jobs_;
}

void TransferWorker::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    bool failed = false;
    try {
      job();
    } catch (const std::exception& e) {
      failed = true;
      spdlog::error("transfer worker: a job failed: {}", e.what());
    } catch (...) {
      failed = true;
      spdlog::error("transfer worker: a job failed with a non-standard exception");
    }
    job = nullptr;  // its captures (promises, buffers) go before the worker reports idle
    lock.lock();
    failed_jobs_ += failed ? 1 : 0;
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace kvplan
