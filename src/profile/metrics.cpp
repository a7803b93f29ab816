#include "profile/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/logit_softcap.h"

namespace kvplan {

std::vector<RowMatrix> split_heads(const RowMatrix& x, int n, int head_dim) {
  if (x.cols() != static_cast<Eigen::Index>(n) * head_dim) {
    fail(ErrorCode::kInternal, "split_heads: [{}, {}] is not {} heads of {}", x.rows(), x.cols(), n,
         head_dim);
  }
  std::vector<RowMatrix> heads(static_cast<size_t>(n));
  for (int h = 0; h < n; ++h) {
    heads[static_cast<size_t>(h)] = x.middleCols(static_cast<Eigen::Index>(h) * head_dim, head_dim);
  }
  return heads;
}

RowErrors row_errors(const RowMatrix& exact, const RowMatrix& approx) {
  RowErrors e;
  for (Eigen::Index r = 0; r < exact.rows(); ++r) {
    double num = 0, den = 0;
    const float* x = exact.row(r).data();
    const float* y = approx.row(r).data();
    for (Eigen::Index i = 0; i < exact.cols(); ++i) {
      const double d = static_cast<double>(y[i]) - static_cast<double>(x[i]);
      num += d * d;
      den += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    }
    if (den > 0) {
      e.relative.sum += std::sqrt(num / den);
      ++e.relative.count;
    }
    e.squared.sum += num;
    ++e.squared.count;
  }
  return e;
}

MetricSum relative_row_error(const RowMatrix& exact, const RowMatrix& approx) {
  return row_errors(exact, approx).relative;
}

MetricSum squared_row_error(const RowMatrix& exact, const RowMatrix& approx) {
  return row_errors(exact, approx).squared;
}

RowMatrix attention_probabilities(const RowMatrix& q_head, const RowMatrix& k_head,
                                  const AttentionLayerShape& shape) {
  const Eigen::Index T = q_head.rows();
  const int64_t window = shape.window;
  const float scale = 1.0f / std::sqrt(static_cast<float>(q_head.cols()));
  RowMatrix p;
  p.noalias() = (q_head * k_head.transpose()) * scale;  // [T, T]
  if (shape.logit_softcap > 0) {
    p = p.unaryExpr([cap = shape.logit_softcap](float s) { return soft_cap(s, cap); });
  }
  for (Eigen::Index t = 0; t < T; ++t) {
    Eigen::Index first = 0;
    if (window > 0 && t + 1 > window) first = t + 1 - window;
    auto row = p.row(t);
    const float max = row.segment(first, t + 1 - first).maxCoeff();
    double sum = 0;
    for (Eigen::Index j = first; j <= t; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (Eigen::Index j = 0; j < T; ++j) row[j] = (j >= first && j <= t) ? row[j] * inv : 0.0f;
  }
  return p;
}

MetricSum attention_score_error(const RowMatrix& exact, const RowMatrix& approx) {
  MetricSum s;
  for (Eigen::Index r = 0; r < exact.rows(); ++r) {
    double l1 = 0;
    // Only keys 0..r are non-zero in a causal row.
    for (Eigen::Index j = 0; j <= std::min(r, exact.cols() - 1); ++j) {
      l1 += std::abs(static_cast<double>(approx(r, j)) - static_cast<double>(exact(r, j)));
    }
    s.sum += l1;
    ++s.count;
  }
  return s;
}

LayerErrors layer_errors(const RowMatrix& q, const RowMatrix& k, const RowMatrix& v,
                         const RowMatrix& k_hat, const RowMatrix& v_hat,
                         const AttentionLayerShape& shape) {
  const std::vector<RowMatrix> qh = split_heads(q, shape.n_heads, shape.head_dim);
  const std::vector<RowMatrix> kh = split_heads(k, shape.n_kv_heads, shape.head_dim);
  const std::vector<RowMatrix> vh = split_heads(v, shape.n_kv_heads, shape.head_dim);
  const std::vector<RowMatrix> khq = split_heads(k_hat, shape.n_kv_heads, shape.head_dim);
  const std::vector<RowMatrix> vhq = split_heads(v_hat, shape.n_kv_heads, shape.head_dim);
  LayerErrors e;
  for (int g = 0; g < shape.n_kv_heads; ++g) {
    e.e_k.add(relative_row_error(kh[static_cast<size_t>(g)], khq[static_cast<size_t>(g)]));
    e.e_v.add(relative_row_error(vh[static_cast<size_t>(g)], vhq[static_cast<size_t>(g)]));
  }
  const int group = shape.n_heads / shape.n_kv_heads;
  for (int h = 0; h < shape.n_heads; ++h) {
    const size_t g = static_cast<size_t>(h / group);
    const RowMatrix p = attention_probabilities(qh[static_cast<size_t>(h)], kh[g], shape);
    const RowMatrix pq = attention_probabilities(qh[static_cast<size_t>(h)], khq[g], shape);
    e.e_a.add(attention_score_error(p, pq));
    // Every product in the profiler is written `out.noalias() = a * b`: Eigen evaluates
    // `out = a * b` into an existing matrix along another path whose rounding differs.
    RowMatrix o, oq;
    o.noalias() = p * vh[g];
    oq.noalias() = pq * vhq[g];
    e.e_o.add(relative_row_error(o, oq));
  }
  return e;
}

MetricSum kl_sum(const ReferenceDistribution& ref, const RowMatrix& logits) {
  if (logits.rows() != ref.logits.rows() || logits.cols() != ref.logits.cols()) {
    fail(ErrorCode::kInternal, "kl_sum: logits [{}, {}] vs reference [{}, {}]", logits.rows(),
         logits.cols(), ref.logits.rows(), ref.logits.cols());
  }
  MetricSum s;
  const bool kept = !ref.probabilities.empty();
  for (Eigen::Index t = 0; t < logits.rows(); ++t) {
    const auto r = static_cast<size_t>(t);
    const LogitSummary q = summarize_logits(logits.row(t));
    s.sum +=
        kept ? next_token_kl(ref.logits.row(t), ref.probabilities[r], ref.rows[r], logits.row(t), q)
             : next_token_kl(ref.logits.row(t), ref.rows[r], logits.row(t), q);
    ++s.count;
  }
  return s;
}

}  // namespace kvplan
