// A thread that runs posted jobs in order — the runtime's stand-in for a dedicated copy stream.
// Jobs must not throw (they report through their own promises).
#pragma once

#include <condition_variable>
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
  void drain();  // returns when the queue is empty and no job runs
  void stop();   // drains and joins; idempotent

 private:
  void run();
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvplan
