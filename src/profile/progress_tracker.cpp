#include "profile/progress_tracker.h"

#include <utility>

namespace kvplan {

ProgressTracker::ProgressTracker(ProfileProgressCallback callback, size_t cells_total,
                                 double work_total)
    : callback_(std::move(callback)), start_(std::chrono::steady_clock::now()) {
  state_.cells_total = cells_total;
  state_.work_total = work_total;
}

void ProgressTracker::report(const char* phase, int layer, size_t cells, double work) {
  const std::lock_guard lock(mu_);
  state_.phase = phase;
  state_.layer = layer;
  state_.cells_done += cells;
  state_.work_done += work;
  state_.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (callback_) callback_(state_);
}

}  // namespace kvplan
