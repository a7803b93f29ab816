#include "model/next_token_kl.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kvplan {
namespace {

TEST(NextTokenKl, SummaryIsTheLogSumExpAndTheFirstLargestLogit) {
  RowMatrix z(1, 4);
  z << 1.0f, 3.0f, 3.0f, -2.0f;
  const LogitSummary s = summarize_logits(z.row(0));
  EXPECT_EQ(s.argmax, 1);
  const double expected = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(-2.0));
  EXPECT_NEAR(s.log_sum_exp, expected, 1e-12);
  EXPECT_NEAR(log_prob(z.row(0), s, 3), -2.0 - expected, 1e-12);
}

TEST(NextTokenKl, MatchesTheDefinitionAndSurvivesLargeLogits) {
  // Logits near 1e3 overflow exp() unless the maximum is taken out first.
  RowMatrix zp(1, 3), zq(1, 3);
  zp << 1000.0f, 999.0f, 990.0f;
  zq << 1000.5f, 998.0f, 991.0f;
  const LogitSummary p = summarize_logits(zp.row(0)), q = summarize_logits(zq.row(0));
  double kl = 0;
  for (int v = 0; v < 3; ++v) {
    const double lp = log_prob(zp.row(0), p, v), lq = log_prob(zq.row(0), q, v);
    kl += std::exp(lp) * (lp - lq);
  }
  ASSERT_TRUE(std::isfinite(kl));
  EXPECT_GT(kl, 0.01);
  EXPECT_NEAR(next_token_kl(zp.row(0), p, zq.row(0), q), kl, 1e-12);
  EXPECT_EQ(next_token_kl(zp.row(0), p, zp.row(0), p), 0.0);
}

TEST(NextTokenKl, ReferenceKeepsEveryRowsSummary) {
  RowMatrix z(2, 3);
  z << 0.0f, 1.0f, 2.0f, 5.0f, 4.0f, 3.0f;
  const ReferenceDistribution r = reference_distribution(z);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].argmax, 2);
  EXPECT_EQ(r.rows[1].argmax, 0);
  EXPECT_EQ(r.logits, z);
}

// The profiler keeps a reference's probabilities to compare it against many re-runs; the KL must
// be the same bits as when each comparison computes them.
TEST(NextTokenKl, KeptProbabilitiesGiveTheSameBits) {
  const Eigen::Index vocab = 4099;  // not a multiple of any vector width
  const RowMatrix zp = RowMatrix::Random(3, vocab) * 8.0f;
  const RowMatrix zq = zp + RowMatrix::Random(3, vocab) * 0.5f;
  ReferenceDistribution r = reference_distribution(zp);
  EXPECT_EQ(r.probabilities_bytes(), size_t{3} * vocab * sizeof(double));
  r.keep_probabilities();
  ASSERT_EQ(r.probabilities.size(), 3u);
  for (Eigen::Index t = 0; t < 3; ++t) {
    const auto row = static_cast<size_t>(t);
    const LogitSummary q = summarize_logits(zq.row(t));
    const double computed = next_token_kl(zp.row(t), r.rows[row], zq.row(t), q);
    const double kept = next_token_kl(zp.row(t), r.probabilities[row], r.rows[row], zq.row(t), q);
    EXPECT_GT(computed, 0.0);
    EXPECT_EQ(kept, computed) << "row " << t;
    EXPECT_NEAR(r.probabilities[row].sum(), 1.0, 1e-12);
  }
}

}  // namespace
}  // namespace kvplan
