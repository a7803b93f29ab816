// Progress of a profile run as the profiler reports it: a ProfileProgress record, and the tracker
// that the worker threads of the reference pass and the cell runner add their work to.
//
//   kvplan::ProgressTracker tracker(options.progress, cells_total, work_total);
//   tracker.report("layers", layer, 1, layer_forwards);  // from any thread
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>

namespace kvplan {

struct ProfileProgress {
  const char* phase = "";  // "reference", "layers"
  int layer = -1;          // layer being profiled (phase "layers")
  size_t cells_done = 0;
  size_t cells_total = 0;  // cells this run computes
  double work_done = 0;    // in layer-forward equivalents, for the ETA
  double work_total = 0;
  double elapsed_s = 0;
};

using ProfileProgressCallback = std::function<void(const ProfileProgress&)>;

// Thread-safe: report() adds to the totals and calls the callback (when set) under one lock, so
// the callback sees one report at a time.
class ProgressTracker {
 public:
  ProgressTracker(ProfileProgressCallback callback, size_t cells_total, double work_total);
  void report(const char* phase, int layer, size_t cells, double work);

 private:
  ProfileProgressCallback callback_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  ProfileProgress state_;
};

}  // namespace kvplan
