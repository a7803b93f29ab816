// Paired bootstrap intervals (a clear difference, no difference, an exact constant difference,
// seeding) and Spearman's rank correlation against hand-computed values, plus the refused inputs.
#include "search/paired_stats.h"

#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan::search {
namespace {

// Per-prompt sums for `n` prompts: token counts w_i in [20, 200], b's KL per token varying by
// prompt, a = b - delta * w plus noise of `noise` per token.
struct PairedData {
  std::vector<double> a, b, w;
};

PairedData make_data(size_t n, double delta, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tokens(20, 200);
  std::uniform_real_distribution<double> kl_per_token(0.2, 1.5);
  std::normal_distribution<double> jitter(0.0, 1.0);
  PairedData d;
  for (size_t i = 0; i < n; ++i) {
    const double w = tokens(rng);
    const double b = kl_per_token(rng) * w;
    d.w.push_back(w);
    d.b.push_back(b);
    d.a.push_back(b - delta * w + noise * jitter(rng) * w);
  }
  return d;
}

template <typename F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected Error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PairedBootstrap, ClearlyLowerA) {
  const PairedData d = make_data(200, 0.1, 0.05, 21);
  const PairedInterval ci = paired_bootstrap(d.a, d.b, d.w);
  EXPECT_TRUE(ci.a_lower);
  EXPECT_FALSE(ci.b_lower);
  EXPECT_LT(ci.low, ci.mean_difference);
  EXPECT_GT(ci.high, ci.mean_difference);
  EXPECT_LE(ci.low, -0.1);
  EXPECT_GE(ci.high, -0.1);
  EXPECT_LT(ci.high - ci.low, 0.05);

  // Swapping the configurations mirrors the interval.
  const PairedInterval swapped = paired_bootstrap(d.b, d.a, d.w);
  EXPECT_TRUE(swapped.b_lower);
  EXPECT_FALSE(swapped.a_lower);
  EXPECT_NEAR(swapped.mean_difference, -ci.mean_difference, 1e-12);
}

TEST(PairedBootstrap, MeanDifferenceIsTokenWeighted) {
  // Naive f64 reference: sum(a - b) / sum(w), not the mean of per-prompt ratios.
  const std::vector<double> a = {3.0, 10.0, 1.0}, b = {1.0, 4.0, 2.0}, w = {2.0, 10.0, 4.0};
  const PairedInterval ci = paired_bootstrap(a, b, w, 500);
  EXPECT_DOUBLE_EQ(ci.mean_difference, (2.0 + 6.0 - 1.0) / 16.0);
}

TEST(PairedBootstrap, IdenticalInputsGiveZeroWidthInterval) {
  const PairedData d = make_data(50, 0.0, 0.0, 22);
  const PairedInterval ci = paired_bootstrap(d.b, d.b, d.w);
  EXPECT_EQ(ci.mean_difference, 0.0);
  EXPECT_EQ(ci.low, 0.0);
  EXPECT_EQ(ci.high, 0.0);
  EXPECT_FALSE(ci.a_lower);
  EXPECT_FALSE(ci.b_lower);
}

TEST(PairedBootstrap, ConstantPerTokenDifferenceIsExact) {
  // a_i - b_i = 0.25 * w_i for every prompt: every resample's ratio is 0.25.
  const PairedData d = make_data(40, -0.25, 0.0, 23);
  const PairedInterval ci = paired_bootstrap(d.a, d.b, d.w);
  EXPECT_NEAR(ci.mean_difference, 0.25, 1e-12);
  EXPECT_NEAR(ci.low, 0.25, 1e-12);
  EXPECT_NEAR(ci.high, 0.25, 1e-12);
  EXPECT_TRUE(ci.b_lower);
}

TEST(PairedBootstrap, SeedDeterminesResult) {
  const PairedData d = make_data(60, 0.02, 0.1, 24);
  const PairedInterval first = paired_bootstrap(d.a, d.b, d.w, 1000, 7);
  const PairedInterval again = paired_bootstrap(d.a, d.b, d.w, 1000, 7);
  EXPECT_EQ(first.low, again.low);
  EXPECT_EQ(first.high, again.high);
  EXPECT_EQ(first.mean_difference, again.mean_difference);
  const PairedInterval other = paired_bootstrap(d.a, d.b, d.w, 1000, 8);
  EXPECT_EQ(other.mean_difference, first.mean_difference);
  EXPECT_TRUE(other.low != first.low || other.high != first.high);
}

TEST(PairedBootstrap, BadInputsRefused) {
  const std::vector<double> a = {1, 2}, b = {1, 1}, w = {3, 4}, one = {1};
  expect_invalid([&] { (void)paired_bootstrap(a, one, w); }, "got 2, 1 and 2");
  expect_invalid([&] { (void)paired_bootstrap(a, b, one); }, "got 2, 2 and 1");
  expect_invalid([&] { (void)paired_bootstrap({}, {}, {}); }, "got 0");
  const std::vector<double> zero_w = {3, 0}, negative_w = {-1, 4}, nan_w = {3, std::nan("")};
  expect_invalid([&] { (void)paired_bootstrap(a, b, zero_w); }, "weights[1]: expected > 0, got 0");
  expect_invalid([&] { (void)paired_bootstrap(a, b, negative_w); }, "weights[0]");
  expect_invalid([&] { (void)paired_bootstrap(a, b, nan_w); }, "weights[1]");
  const std::vector<double> inf_sum = {1, INFINITY}, nan_sum = {std::nan(""), 1};
  expect_invalid([&] { (void)paired_bootstrap(inf_sum, b, w); }, "a_sums[1]");
  expect_invalid([&] { (void)paired_bootstrap(a, nan_sum, w); }, "b_sums[0]");
  expect_invalid([&] { (void)paired_bootstrap(a, b, w, 99); },
                 "resamples: expected >= 100, got 99");
}

TEST(Spearman, PerfectAgreementAndReversal) {
  const std::vector<double> x = {0.3, -1.0, 2.5, 7.0, 4.0};
  // Any increasing transform keeps the ranks: +1; a decreasing one reverses them: -1.
  std::vector<double> up, down;
  for (double v : x) {
    up.push_back(std::exp(v));
    down.push_back(-v * v * v);
  }
  EXPECT_DOUBLE_EQ(spearman_rank_correlation(x, up), 1.0);
  EXPECT_DOUBLE_EQ(spearman_rank_correlation(x, down), -1.0);
}

TEST(Spearman, TiesGetAverageRanks) {
  // By hand: ranks x = (1, 2.5, 2.5, 4), y = (1, 3, 2, 4), both with mean 2.5;
  // sum dx*dy = 2.25 + 0 + 0 + 2.25 = 4.5, sum dx^2 = 4.5, sum dy^2 = 5, rho = 4.5 / sqrt(22.5)
  // = sqrt(0.9).
  EXPECT_NEAR(spearman_rank_correlation({1, 2, 2, 3}, {10, 30, 20, 40}), std::sqrt(0.9), 1e-15);
  // Ties in both: x = (1, 1, 2), y = (5, 6, 6) rank as (1.5, 1.5, 3) and (1, 2.5, 2.5), deviations
  // (-0.5, -0.5, 1) and (-1, 0.5, 0.5): sum dx*dy = 0.5 - 0.25 + 0.5 = 0.75, sum dx^2 = 1.5,
  // sum dy^2 = 1.5, rho = 0.5.
  EXPECT_NEAR(spearman_rank_correlation({1, 1, 2}, {5, 6, 6}), 0.5, 1e-15);
}

TEST(Spearman, DegenerateInputs) {
  EXPECT_TRUE(std::isnan(spearman_rank_correlation({}, {})));
  EXPECT_TRUE(std::isnan(spearman_rank_correlation({1.0}, {2.0})));
  EXPECT_TRUE(std::isnan(spearman_rank_correlation({1, 2, 3}, {4, 4, 4})));
  EXPECT_TRUE(std::isnan(spearman_rank_correlation({5, 5}, {1, 2})));
  expect_invalid([] { (void)spearman_rank_correlation({1, 2}, {1}); }, "got 2 and 1");
  expect_invalid([] { (void)spearman_rank_correlation({1, std::nan("")}, {1, 2}); }, "x[1]");
}

}  // namespace
}  // namespace kvplan::search
