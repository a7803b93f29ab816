#include "runtime/transfer_worker.h"

#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

// A job that throws (a GPU backend's check() failing inside a copy) must not end the process: the
// worker counts it and runs the jobs queued after it, in order.
TEST(TransferWorker, AThrowingJobIsCountedAndTheNextJobsRun) {
  TransferWorker worker;
  std::vector<int> ran;  // written by the worker only; read after drain()
  worker.post([&] { ran.push_back(1); });
  worker.post([] { fail(ErrorCode::kInternal, "device->host transfer: injected failure"); });
  worker.post([] { throw 7; });  // not even a std::exception
  worker.post([&] { ran.push_back(2); });
  worker.drain();
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  EXPECT_EQ(worker.failed_jobs(), 2u);
  worker.post([&] { ran.push_back(3); });
  worker.stop();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

}  // namespace
}  // namespace kvplan
