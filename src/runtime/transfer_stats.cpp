#include "runtime/transfer_stats.h"

#include <cmath>

namespace kvplan {

void LinearTransferFit::add(double bytes, double seconds) {
  ++n_;
  sb_ += bytes;
  st_ += seconds;
  sbb_ += bytes * bytes;
  sbt_ += bytes * seconds;
}

TransferFitResult LinearTransferFit::result() const {
  TransferFitResult r;
  r.transfers = n_;
  r.total_bytes = sb_;
  r.total_seconds = st_;
  if (n_ == 0) return r;
  const double n = static_cast<double>(n_);
  const double var = n * sbb_ - sb_ * sb_;
  // Least squares needs sizes that vary; otherwise report the mean rate and no fixed cost.
  if (n_ >= 2 && var > 1e-9 * n * sbb_) {
    double slope = (n * sbt_ - sb_ * st_) / var;
    double t0 = (st_ - slope * sb_) / n;
    // A transfer cannot cost less than nothing: when noise pulls the intercept below zero, the
    // best fit with t0 >= 0 has t0 = 0 and the least-squares slope through the origin.
    if (t0 < 0) {
      t0 = 0;
      slope = sbt_ / sbb_;
    }
    r.t0_seconds = t0;
    r.bytes_per_second = slope > 0 ? 1.0 / slope : 0.0;
  } else if (st_ > 0) {
    r.bytes_per_second = sb_ / st_;
  }
  return r;
}

}  // namespace kvplan
