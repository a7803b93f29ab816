#include "search/surrogate.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan::search {
namespace {

TEST(Surrogate, RecoversTrueWeightsAndInteractionFromEnoughValidations) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(0.0, 1.0), w(0.3, 2.5);
  const size_t n = 6;
  SurrogateModel truth{std::vector<double>(n), 0.15};
  for (double& t : truth.weights) t = w(rng);
  std::vector<Validation> v;
  for (int k = 0; k < 60; ++k) {
    Validation x;
    for (size_t l = 0; l < n; ++l) x.layer_errors.push_back(u(rng));
    x.measured = predict(truth, x.layer_errors);
    v.push_back(x);
  }
  const SurrogateModel fitted = fit_surrogate(v, n, {.ridge = 1e-9});
  for (size_t l = 0; l < n; ++l) EXPECT_NEAR(fitted.weights[l], truth.weights[l], 1e-3);
  EXPECT_NEAR(fitted.interaction, truth.interaction, 1e-4);
  // Without the interaction feature the fit is additive.
  EXPECT_EQ(fit_surrogate(v, n, {.ridge = 1e-9, .interaction = false}).interaction, 0.0);
}

// Held-out ranking: each validation predicted by a refit on the others. Measurements that follow
// the layer errors are ranked; measurements unrelated to them are not, however well a fit on all
// of them would match them.
TEST(Surrogate, HeldOutRankCorrelationSeparatesASurrogateThatRanksFromOneThatFitsNoise) {
  const size_t n = 8;
  double noise_sum = 0;
  const int seeds = 10;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::uniform_real_distribution<double> u(0.0, 1.0), w(0.5, 2.0);
    SurrogateModel truth{std::vector<double>(n), 0.02};
    for (double& t : truth.weights) t = w(rng);
    std::vector<Validation> follows, noise;
    for (int k = 0; k < 8; ++k) {
      Validation x;
      for (size_t l = 0; l < n; ++l) x.layer_errors.push_back(u(rng));
      x.measured = predict(truth, x.layer_errors);
      follows.push_back(x);
      x.measured = u(rng);
      noise.push_back(x);
    }
    EXPECT_GE(held_out_rank_correlation(follows, n), 0.8) << "seed " << seed;
    const double r = held_out_rank_correlation(noise, n);
    EXPECT_EQ(r, held_out_rank_correlation(noise, n));  // deterministic
    noise_sum += r;
  }
  // Unrelated measurements are not ranked, on average over the seeds.
  EXPECT_LT(noise_sum / seeds, 0.3);
  // Fewer than 3 validations, or nothing to rank: undefined.
  std::vector<Validation> two(2, {std::vector<double>(n, 0.5), 1.0});
  two[1].measured = 2.0;
  EXPECT_TRUE(std::isnan(held_out_rank_correlation(two, n)));
  std::vector<Validation> equal(4, {std::vector<double>(n, 0.5), 1.0});
  EXPECT_TRUE(std::isnan(held_out_rank_correlation(equal, n)));
}

TEST(Surrogate, PredictAddsTheSquaredSumTerm) {
  const SurrogateModel m{{1.0, 2.0}, 0.5};
  // 1*0.1 + 2*0.3 + 0.5 * (0.4)^2
  EXPECT_NEAR(predict(m, {0.1, 0.3}), 0.1 + 0.6 + 0.08, 1e-15);
}

TEST(Surrogate, FewValidationsStayNearThePriorAndNonNegative) {
  // One validation whose real error is twice the additive sum: the fit moves towards it, not to
  // extremes.
  const std::vector<Validation> v = {{{0.1, 0.2, 0.3}, 1.2}};
  const SurrogateModel fitted = fit_surrogate(v, 3);
  EXPECT_NEAR(predict(fitted, v[0].layer_errors), 1.2, 0.05);
  for (double x : fitted.weights) {
    EXPECT_GE(x, 1.0);
    EXPECT_LT(x, 5.0);
  }
  const SurrogateModel negative = fit_surrogate({{{1.0, 0.0}, -5.0}}, 2);
  for (double x : negative.weights) EXPECT_GE(x, 0.25);
  EXPECT_GE(negative.interaction, 0.0);
  const SurrogateModel none = fit_surrogate({}, 4);
  EXPECT_EQ(none.weights, std::vector<double>(4, 1.0));
  EXPECT_EQ(none.interaction, 0.0);
}

// Validations that all hold layer 0 at high precision while the additive sum overshoots what is
// measured: an unbounded fit drives layer 0's weight to 0 (its low-precision error would then cost
// nothing); the trust region keeps it within [1/r, r] of the layer's own measurement.
TEST(Surrogate, WeightsStayWithinTheTrustRegion) {
  std::vector<Validation> v;
  for (int k = 0; k < 4; ++k) {
    const double e0 = 0.010 + 0.001 * k;  // layer 0: high precision, still the largest error
    v.push_back({{e0, 0.001, 0.002}, 0.0005 + 0.00005 * k});
  }
  const SurrogateFitOptions additive{.ridge = 1e-6, .interaction = false};
  SurrogateFitOptions no_bound = additive;
  no_bound.weight_range = 1e9;
  const SurrogateModel unbounded = fit_surrogate(v, 3, no_bound);
  EXPECT_LT(unbounded.weights[0], 0.05);
  const SurrogateModel fitted = fit_surrogate(v, 3, additive);
  for (double w : fitted.weights) {
    EXPECT_GE(w, 0.25);
    EXPECT_LE(w, 4.0);
  }
  EXPECT_DOUBLE_EQ(fitted.weights[0], 0.25);
  // Layer 0 at its cheapest format (error 1.0): the unbounded fit calls it nearly free.
  EXPECT_LT(predict(unbounded, {1.0, 0.001, 0.002}), 0.06);
  EXPECT_GE(predict(fitted, {1.0, 0.001, 0.002}), 0.25);
  EXPECT_THROW((void)fit_surrogate(v, 3, {.weight_range = 0.5}), Error);
}

}  // namespace
}  // namespace kvplan::search
