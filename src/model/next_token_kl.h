// Next-token distributions compared position by position, straight from logits rows: the exact
// model's p = softmax(z_p) against a re-run's q = softmax(z_q). Every sum is in f64 over the f32
// logits, and nothing [T, vocab] is held in f64 (a long text's logits already take GBs in f32).
//
//   const LogitSummary p = summarize_logits(exact.row(t)), q = summarize_logits(quant.row(t));
//   double kl = next_token_kl(exact.row(t), p, quant.row(t), q);   // KL(p || q), nats
//   double nll = -log_prob(quant.row(t), q, next_token);
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_weights.h"

namespace kvplan {

// One row of logits reduced to what comparisons need.
struct LogitSummary {
  double log_sum_exp = 0;  // log sum_v exp(z_v)
  int32_t argmax = 0;      // first index of the largest logit
};

using LogitRow = Eigen::Ref<const Eigen::RowVectorXf>;

LogitSummary summarize_logits(const LogitRow& z);

// log softmax(z)[token].
inline double log_prob(const LogitRow& z, const LogitSummary& s, int32_t token) {
  return static_cast<double>(z[token]) - s.log_sum_exp;
}

// KL(softmax(z_p) || softmax(z_q)) in nats, clamped at 0:
//   sum_v p_v (z_p,v - z_q,v) + (lse_q - lse_p) * sum_v p_v,
// which stays exact when p's rounded probabilities do not sum to exactly 1.
double next_token_kl(const LogitRow& z_p, const LogitSummary& p, const LogitRow& z_q,
                     const LogitSummary& q);

// p = softmax(z_p) in f64: the factor every KL against row z_p starts from.
Eigen::ArrayXd softmax_probabilities(const LogitRow& z_p, const LogitSummary& p);

// next_token_kl with p's probabilities computed once beforehand (the same bits): a reference row
// compared against many re-runs skips one exp per vocabulary entry per comparison.
double next_token_kl(const LogitRow& z_p, const Eigen::ArrayXd& p_probabilities,
                     const LogitSummary& p, const LogitRow& z_q, const LogitSummary& q);

// The exact model's logits of one prompt, kept to compare many re-runs against.
struct ReferenceDistribution {
  RowMatrix logits;                // [T, vocab]
  std::vector<LogitSummary> rows;  // [T]
  // [T] rows of softmax_probabilities, or empty (computed per comparison instead): T * vocab * 8
  // bytes, kept when a caller can afford them.
  std::vector<Eigen::ArrayXd> probabilities;
  [[nodiscard]] size_t probabilities_bytes() const {
    return static_cast<size_t>(logits.size()) * sizeof(double);
  }
  void keep_probabilities();
};
ReferenceDistribution reference_distribution(RowMatrix logits);

}  // namespace kvplan
