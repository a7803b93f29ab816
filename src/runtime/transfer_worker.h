// A thread that runs posted jobs in order — the runtime's stand-in for a dedicated copy stream.
// Jobs report through their own promises and should not throw; one that does anyway (a GPU error
// its job did not catch) is counted, logged and dropped, and the worker goes on with the next.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace kvplan {

class TransferWorker {
 public:
  TransferWorker();
  ~TransferWorker();  // runs what is queued, then joins
  TransferWorker(const TransferWorker&) = delete;
  TransferWorker& operator=(const TransferWorker&) = delete;

  void post(std::function<void()> job);
  void drain();                                // returns when the queue is empty and no job runs
  void stop();                                 // drains and joins; idempotent
  [[nodiscard]] uint64_t failed_jobs() const;  // jobs that threw

 private:
  void run();
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  uint64_t failed_jobs_ = 0;
  std::thread thread_;
};

}  // namespace kvplan
