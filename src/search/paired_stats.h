// Paired comparisons of two configurations measured on the same units (prompts), and the rank
// agreement of two orderings.
//
// paired_bootstrap: the 95% percentile bootstrap interval (Efron & Tibshirani 1993, ch. 13) of
// the token-weighted mean difference
//   d = sum_i (a_i - b_i) / sum_i w_i
// where a_i, b_i are per-unit sums (e.g. KL summed over a prompt's scored tokens) and w_i the
// per-unit token count: a ratio estimator, so long prompts weigh by their tokens while units, not
// tokens, are resampled (tokens of one prompt are correlated). Pairing cancels the per-prompt
// difficulty both configurations share, which makes the interval much narrower than comparing
// two unpaired means.
//
//   kvplan::search::PairedInterval ci = kvplan::search::paired_bootstrap(kl_a, kl_b, tokens);
//   if (ci.a_lower) ...  // a has lower KL than b, the interval excluding zero
#pragma once

#include <cstdint>
#include <vector>

namespace kvplan::search {

struct PairedInterval {
  double mean_difference = 0;  // sum(a - b) / sum(w) over all units
  double low = 0;              // 2.5% percentile of the bootstrap distribution
  double high = 0;             // 97.5% percentile
  bool a_lower = false;        // high < 0: a is lower than b, the interval excluding zero
  bool b_lower = false;        // low > 0
};

// "plan lower" / "plan higher" when a 95 % interval of plan - other excludes zero, else
// "no difference".
inline const char* paired_verdict(double low, double high) {
  return high < 0 ? "plan lower" : low > 0 ? "plan higher" : "no difference";
}

// Resamples units with replacement `resamples` times from a std::mt19937_64 seeded by `seed`; the
// same inputs and seed give the same interval on every platform. Throws Error(kInvalidArgument)
// for unequal sizes, no units, a weight that is not > 0, a non-finite sum or resamples < 100.
[[nodiscard]] PairedInterval paired_bootstrap(const std::vector<double>& a_sums,
                                              const std::vector<double>& b_sums,
                                              const std::vector<double>& weights,
                                              int resamples = 2000, uint64_t seed = 1);

// Spearman's rank correlation (Pearson correlation of the ranks, tied values sharing their average
// rank). NaN for fewer than 2 points or a constant vector. Throws Error(kInvalidArgument) for
// unequal sizes or a NaN value (which has no rank).
[[nodiscard]] double spearman_rank_correlation(const std::vector<double>& x,
                                               const std::vector<double>& y);

}  // namespace kvplan::search
