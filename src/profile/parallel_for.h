// The profiler's one way of spreading work items (prompts, cells, sequences of a batch) over
// threads: each item runs whole on one thread, so its numbers do not depend on the thread count.
//
//   kvplan::parallel_for(prompts.size(), threads, [&](size_t i) { partials[i] = measure(i); });
#pragma once

#include <cstddef>
#include <exception>
#include <mutex>

namespace kvplan {

// Runs body(i) for i in [0, n) on `threads` threads (dynamic schedule); the first exception is
// rethrown after the loop, since none may leave an OpenMP region.
template <typename Body>
void parallel_for(size_t n, int threads, Body&& body) {
  std::exception_ptr error;
  std::mutex mu;
  const long count = static_cast<long>(n);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (long i = 0; i < count; ++i) {
    try {
      body(static_cast<size_t>(i));
    } catch (...) {
      const std::lock_guard lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace kvplan
