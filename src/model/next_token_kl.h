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

// The exact model's logits of one prompt, kept to compare many re-runs against.
struct ReferenceDistribution {
  RowMatrix logits;                // [T, vocab]
  std::vector<LogitSummary> rows;  // [T]
};
ReferenceDistribution reference_distribution(RowMatrix logits);

}  // namespace kvplan
