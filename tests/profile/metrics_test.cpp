// Metric definitions (src/profile/metrics.h) against naive f64 loops written from the header's
// formulas, on fresh random inputs.
#include "profile/metrics.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace kvplan {
namespace {

RowMatrix random_matrix(std::mt19937& rng, int rows, int cols, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  RowMatrix m(rows, cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) m(r, c) = d(rng);
  }
  return m;
}

RowMatrix perturb(std::mt19937& rng, const RowMatrix& x, float noise) {
  return x + random_matrix(rng, static_cast<int>(x.rows()), static_cast<int>(x.cols()), noise);
}

// Naive f64 causal windowed attention of query head h over KV head g: probabilities [T][T].
std::vector<std::vector<double>> naive_probs(const RowMatrix& q, const RowMatrix& k, int h, int g,
                                             int d, int64_t window) {
  const int T = static_cast<int>(q.rows());
  std::vector<std::vector<double>> p(T, std::vector<double>(T, 0.0));
  for (int t = 0; t < T; ++t) {
    const int first = window > 0 && t + 1 > window ? t + 1 - static_cast<int>(window) : 0;
    std::vector<double> s(T, 0.0);
    double max = -1e300;
    for (int j = first; j <= t; ++j) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += double(q(t, h * d + i)) * double(k(j, g * d + i));
      s[j] = dot / std::sqrt(double(d));
      max = std::max(max, s[j]);
    }
    double sum = 0;
    for (int j = first; j <= t; ++j) sum += std::exp(s[j] - max);
    for (int j = first; j <= t; ++j) p[t][j] = std::exp(s[j] - max) / sum;
  }
  return p;
}

double naive_rel(const std::vector<double>& exact, const std::vector<double>& approx) {
  double num = 0, den = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    num += (approx[i] - exact[i]) * (approx[i] - exact[i]);
    den += exact[i] * exact[i];
  }
  return std::sqrt(num / den);
}

struct Naive {
  double e_k = 0, e_v = 0, e_a = 0, e_o = 0;
};

Naive naive_layer(const RowMatrix& q, const RowMatrix& k, const RowMatrix& v, const RowMatrix& kq,
                  const RowMatrix& vq, const AttentionLayerShape& s) {
  const int T = static_cast<int>(q.rows()), d = s.head_dim;
  Naive n;
  auto row = [&](const RowMatrix& m, int t, int head) {
    std::vector<double> r(d);
    for (int i = 0; i < d; ++i) r[i] = m(t, head * d + i);
    return r;
  };
  for (int t = 0; t < T; ++t) {
    for (int g = 0; g < s.n_kv_heads; ++g) {
      n.e_k += naive_rel(row(k, t, g), row(kq, t, g));
      n.e_v += naive_rel(row(v, t, g), row(vq, t, g));
    }
  }
  n.e_k /= T * s.n_kv_heads;
  n.e_v /= T * s.n_kv_heads;
  const int group = s.n_heads / s.n_kv_heads;
  for (int h = 0; h < s.n_heads; ++h) {
    const int g = h / group;
    const auto p = naive_probs(q, k, h, g, d, s.window);
    const auto pq = naive_probs(q, kq, h, g, d, s.window);
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < T; ++j) n.e_a += std::abs(pq[t][j] - p[t][j]);
      std::vector<double> o(d, 0.0), oq(d, 0.0);
      for (int j = 0; j < T; ++j) {
        for (int i = 0; i < d; ++i) {
          o[i] += p[t][j] * v(j, g * d + i);
          oq[i] += pq[t][j] * vq(j, g * d + i);
        }
      }
      n.e_o += naive_rel(o, oq);
    }
  }
  n.e_a /= T * s.n_heads;
  n.e_o /= T * s.n_heads;
  return n;
}

TEST(Metrics, LayerErrorsMatchNaiveF64) {
  std::mt19937 rng(1234);
  for (const AttentionLayerShape shape :
       {AttentionLayerShape{4, 2, 16, 0}, AttentionLayerShape{6, 3, 8, 5},
        AttentionLayerShape{2, 2, 32, 0}}) {
    const int T = 23;
    const RowMatrix q = random_matrix(rng, T, shape.n_heads * shape.head_dim, 1.0f);
    const RowMatrix k = random_matrix(rng, T, shape.n_kv_heads * shape.head_dim, 1.5f);
    const RowMatrix v = random_matrix(rng, T, shape.n_kv_heads * shape.head_dim, 0.7f);
    const RowMatrix kq = perturb(rng, k, 0.1f);
    const RowMatrix vq = perturb(rng, v, 0.05f);
    const LayerErrors e = layer_errors(q, k, v, kq, vq, shape);
    const Naive n = naive_layer(q, k, v, kq, vq, shape);
    EXPECT_NEAR(e.e_k.mean(), n.e_k, 1e-5 * n.e_k);
    EXPECT_NEAR(e.e_v.mean(), n.e_v, 1e-5 * n.e_v);
    EXPECT_NEAR(e.e_a.mean(), n.e_a, 1e-4 * n.e_a);
    EXPECT_NEAR(e.e_o.mean(), n.e_o, 1e-4 * n.e_o);
    EXPECT_EQ(e.e_k.count, T * shape.n_kv_heads);
    EXPECT_EQ(e.e_a.count, T * shape.n_heads);
    EXPECT_GT(n.e_a, 0.0);
  }
}

TEST(Metrics, ExactInputsGiveZeroAndZeroRowsAreSkipped) {
  std::mt19937 rng(7);
  const AttentionLayerShape shape{4, 1, 8, 0};
  const RowMatrix q = random_matrix(rng, 9, 32, 1.0f);
  RowMatrix k = random_matrix(rng, 9, 8, 1.0f);
  const RowMatrix v = random_matrix(rng, 9, 8, 1.0f);
  const LayerErrors e = layer_errors(q, k, v, k, v, shape);
  EXPECT_EQ(e.e_k.sum, 0.0);
  EXPECT_EQ(e.e_a.sum, 0.0);
  EXPECT_EQ(e.e_o.sum, 0.0);
  k.row(3).setZero();
  const MetricSum s = relative_row_error(k, perturb(rng, k, 0.1f));
  EXPECT_EQ(s.count, 8);  // the all-zero row has no relative error
}

TEST(Metrics, RowErrorsMatchTheirDefinitionsInOnePass) {
  std::mt19937 rng(11);
  RowMatrix exact = random_matrix(rng, 6, 16, 2.0f);
  exact.row(2).setZero();
  const RowMatrix approx = perturb(rng, exact, 0.3f);
  double relative = 0, squared = 0;
  for (Eigen::Index r = 0; r < exact.rows(); ++r) {
    const Eigen::RowVectorXd x = exact.row(r).cast<double>(), y = approx.row(r).cast<double>();
    squared += (y - x).squaredNorm();
    if (r != 2) relative += (y - x).norm() / x.norm();
  }
  const RowErrors e = row_errors(exact, approx);
  EXPECT_EQ(e.relative.count, 5);  // the all-zero row has no relative error
  EXPECT_EQ(e.squared.count, 6);
  EXPECT_NEAR(e.relative.sum, relative, 1e-12);
  EXPECT_NEAR(e.squared.sum, squared, 1e-12);
  EXPECT_GT(e.squared.sum, 0.0);
  EXPECT_EQ(relative_row_error(exact, approx).sum, e.relative.sum);
  EXPECT_EQ(squared_row_error(exact, approx).sum, e.squared.sum);
}

TEST(Metrics, KlMatchesNaiveF64) {
  std::mt19937 rng(99);
  const RowMatrix ref_logits = random_matrix(rng, 7, 300, 3.0f);
  const RowMatrix q_logits = perturb(rng, ref_logits, 0.2f);
  const ReferenceDistribution ref = reference_distribution(ref_logits);
  const MetricSum s = kl_sum(ref, q_logits);
  const auto log_softmax = [](const RowMatrix& z, int t) {
    const Eigen::RowVectorXd row = z.row(t).cast<double>();
    return Eigen::RowVectorXd(row.array() - std::log(row.array().exp().sum()));
  };
  double naive = 0;
  for (int t = 0; t < 7; ++t) {
    const Eigen::RowVectorXd lp = log_softmax(ref_logits, t), lq = log_softmax(q_logits, t);
    for (int v = 0; v < 300; ++v) naive += std::exp(lp[v]) * (lp[v] - lq[v]);
  }
  EXPECT_EQ(s.count, 7);
  EXPECT_NEAR(s.sum, naive, 1e-6 * naive);
  // Same logits: KL 0; logits shifted by a constant: the same distribution.
  EXPECT_NEAR(kl_sum(ref, ref_logits).sum, 0.0, 1e-9);
  RowMatrix shifted = ref_logits.array() + 1.5f;
  EXPECT_NEAR(kl_sum(ref, shifted).sum, 0.0, 1e-5);
}

}  // namespace
}  // namespace kvplan
