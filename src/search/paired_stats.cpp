#include "search/paired_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/error.h"

namespace kvplan::search {
namespace {

// A uniform index in [0, n). std::uniform_int_distribution is implementation-defined, so the same
// seed would give different intervals under libstdc++ and libc++; rejection sampling on the raw
// 64-bit output is portable and unbiased.
size_t draw_index(std::mt19937_64& rng, size_t n) {
  const uint64_t range = n;
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return static_cast<size_t>(x % range);
}

// Linear interpolation between order statistics (Hyndman & Fan type 7) of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double t = position - static_cast<double>(below);
  return sorted[below] + t * (sorted[above] - sorted[below]);
}

// 1-based ranks, tied values given the average of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return v[i] < v[j]; });
  std::vector<double> ranks(v.size());
  for (size_t start = 0; start < order.size();) {
    size_t end = start + 1;
    while (end < order.size() && v[order[end]] == v[order[start]]) ++end;
    // Positions start..end-1 hold ranks start+1..end; their mean is (start + 1 + end) / 2.
    const double rank = static_cast<double>(start + 1 + end) / 2.0;
    for (size_t k = start; k < end; ++k) ranks[order[k]] = rank;
    start = end;
  }
  return ranks;
}

}  // namespace

PairedInterval paired_bootstrap(const std::vector<double>& a_sums,
                                const std::vector<double>& b_sums,
                                const std::vector<double>& weights, int resamples, uint64_t seed) {
  const size_t n = a_sums.size();
  if (b_sums.size() != n || weights.size() != n) {
    fail(ErrorCode::kInvalidArgument,
         "paired_bootstrap: a_sums, b_sums and weights must have equal sizes, got {}, {} and {}", n,
         b_sums.size(), weights.size());
  }
  if (n == 0)
    fail(ErrorCode::kInvalidArgument, "paired_bootstrap: a_sums: expected >= 1 unit, got 0");
  if (resamples < 100) {
    fail(ErrorCode::kInvalidArgument, "paired_bootstrap: resamples: expected >= 100, got {}",
         resamples);
  }
  std::vector<double> differences(n);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a_sums[i])) {
      fail(ErrorCode::kInvalidArgument, "paired_bootstrap: a_sums[{}]: expected finite, got {}", i,
           a_sums[i]);
    }
    if (!std::isfinite(b_sums[i])) {
      fail(ErrorCode::kInvalidArgument, "paired_bootstrap: b_sums[{}]: expected finite, got {}", i,
           b_sums[i]);
    }
    // Written as !(w > 0) so that NaN is refused too.
    if (!(weights[i] > 0) || !std::isfinite(weights[i])) {
      fail(ErrorCode::kInvalidArgument, "paired_bootstrap: weights[{}]: expected > 0, got {}", i,
           weights[i]);
    }
    differences[i] = a_sums[i] - b_sums[i];
  }

  PairedInterval out;
  out.mean_difference = std::accumulate(differences.begin(), differences.end(), 0.0) /
                        std::accumulate(weights.begin(), weights.end(), 0.0);
  std::mt19937_64 rng(seed);
  std::vector<double> statistics(static_cast<size_t>(resamples));
  for (double& statistic : statistics) {
    double difference = 0, weight = 0;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = draw_index(rng, n);
      difference += differences[i];
      weight += weights[i];
    }
    statistic = difference / weight;
  }
  std::sort(statistics.begin(), statistics.end());
  out.low = percentile(statistics, 0.025);
  out.high = percentile(statistics, 0.975);
  out.a_lower = out.high < 0;
  out.b_lower = out.low > 0;
  return out;
}

double spearman_rank_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) {
    fail(ErrorCode::kInvalidArgument,
         "spearman_rank_correlation: x and y must have equal sizes, got {} and {}", x.size(),
         y.size());
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      fail(ErrorCode::kInvalidArgument,
           "spearman_rank_correlation: {}[{}]: expected a number, got NaN",
           std::isnan(x[i]) ? "x" : "y", i);
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (x.size() < 2) return nan;
  const std::vector<double> rx = average_ranks(x), ry = average_ranks(y);
  // Both rank vectors have mean (n + 1) / 2.
  const double mean = static_cast<double>(x.size() + 1) / 2.0;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx == 0 || syy == 0) return nan;  // a constant vector has no ordering to agree with
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace kvplan::search
