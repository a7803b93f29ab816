#include "search/surrogate.h"

#include <random>

#include <gtest/gtest.h>

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
  for (double x : negative.weights) EXPECT_GE(x, 0.0);
  EXPECT_GE(negative.interaction, 0.0);
  const SurrogateModel none = fit_surrogate({}, 4);
  EXPECT_EQ(none.weights, std::vector<double>(4, 1.0));
  EXPECT_EQ(none.interaction, 0.0);
}

}  // namespace
}  // namespace kvplan::search
