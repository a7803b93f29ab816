#include "search/surrogate.h"

#include <random>

#include <gtest/gtest.h>

namespace kvplan::search {
namespace {

TEST(Surrogate, RecoversTrueWeightsFromEnoughValidations) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(0.0, 1.0), w(0.3, 2.5);
  const size_t n = 6;
  std::vector<double> truth(n);
  for (double& t : truth) t = w(rng);
  std::vector<Validation> v;
  for (int k = 0; k < 40; ++k) {
    Validation x;
    for (size_t l = 0; l < n; ++l) x.layer_errors.push_back(u(rng));
    x.measured = predict(truth, x.layer_errors);
    v.push_back(x);
  }
  const auto fitted = fit_surrogate_weights(v, n, {.ridge = 1e-8});
  for (size_t l = 0; l < n; ++l) EXPECT_NEAR(fitted[l], truth[l], 1e-3);
}

TEST(Surrogate, FewValidationsStayNearThePriorAndNonNegative) {
  // One validation whose real error is twice the additive sum: weights move up, not to extremes.
  const std::vector<Validation> v = {{{0.1, 0.2, 0.3}, 1.2}};
  const auto fitted = fit_surrogate_weights(v, 3);
  EXPECT_NEAR(predict(fitted, v[0].layer_errors), 1.2, 0.05);
  for (double x : fitted) {
    EXPECT_GT(x, 1.0);
    EXPECT_LT(x, 5.0);
  }
  const auto negative = fit_surrogate_weights({{{1.0, 0.0}, -5.0}}, 2);
  for (double x : negative) EXPECT_GE(x, 0.0);
  EXPECT_EQ(fit_surrogate_weights({}, 4), std::vector<double>(4, 1.0));
}

}  // namespace
}  // namespace kvplan::search
