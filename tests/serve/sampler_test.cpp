#include "serve/sampler.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace kvplan::serve {
namespace {

Eigen::RowVectorXf logits_of(std::vector<float> v) {
  return Eigen::Map<Eigen::RowVectorXf>(v.data(), static_cast<Eigen::Index>(v.size()));
}

TEST(Sampler, TemperatureZeroIsArgmaxWithTiesToTheLowerId) {
  Sampler s({});
  EXPECT_EQ(s.next(logits_of({0.1f, 2.0f, -1.0f, 2.0f})), 1);
  EXPECT_EQ(s.next(logits_of({5.0f, 2.0f})), 0);
}

TEST(Sampler, TheSameSeedDrawsTheSameTokens) {
  const Eigen::RowVectorXf l = logits_of({1.0f, 1.2f, 0.8f, 1.1f, 0.9f});
  Sampler a({.temperature = 1, .top_p = 1, .seed = 42}),
      b({.temperature = 1, .top_p = 1, .seed = 42});
  Sampler c({.temperature = 1, .top_p = 1, .seed = 43});
  std::vector<int32_t> da, db, dc;
  for (int i = 0; i < 64; ++i) {
    da.push_back(a.next(l));
    db.push_back(b.next(l));
    dc.push_back(c.next(l));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

TEST(Sampler, DrawsFollowTheSoftmaxOfLogitsOverTemperature) {
  const Eigen::RowVectorXf l = logits_of({0.0f, std::log(2.0f), std::log(5.0f)});  // 1:2:5
  for (const double t : {1.0, 2.0}) {
    Sampler s({.temperature = t, .top_p = 1, .seed = 7});
    std::vector<int> counts(3);
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(s.next(l))];
    std::vector<double> p = {1, std::pow(2.0, 1 / t), std::pow(5.0, 1 / t)};
    const double sum = p[0] + p[1] + p[2];
    for (size_t k = 0; k < 3; ++k) {
      const double expected = p[k] / sum;
      // 5 standard deviations of a binomial proportion: a fixed seed, so this never flakes.
      EXPECT_NEAR(counts[k] / double(n), expected, 5 * std::sqrt(expected * (1 - expected) / n))
          << "temperature " << t << " token " << k;
    }
  }
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingIt) {
  // Probabilities 0.5, 0.3, 0.2: top_p 0.6 keeps the first two, top_p 0.5 the first alone.
  const Eigen::RowVectorXf l = logits_of({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
  Sampler two({.temperature = 1, .top_p = 0.6, .seed = 1});
  std::vector<int> counts(3);
  for (int i = 0; i < 20000; ++i) ++counts[static_cast<size_t>(two.next(l))];
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[0] / 20000.0, 0.5 / 0.8, 0.02);
  Sampler one({.temperature = 1, .top_p = 0.5, .seed = 1});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.next(l), 0);
}

}  // namespace
}  // namespace kvplan::serve
