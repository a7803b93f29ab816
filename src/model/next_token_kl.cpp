#include "model/next_token_kl.h"

#include <algorithm>
#include <cmath>

namespace kvplan {

LogitSummary summarize_logits(const LogitRow& z) {
  Eigen::Index arg = 0;
  const double max = z.maxCoeff(&arg);
  const double sum = (z.cast<double>().array() - max).exp().sum();
  return {max + std::log(sum), static_cast<int32_t>(arg)};
}

Eigen::ArrayXd softmax_probabilities(const LogitRow& z_p, const LogitSummary& p) {
  const Eigen::ArrayXd zp = z_p.transpose().cast<double>().array();
  return (zp - p.log_sum_exp).exp();
}

double next_token_kl(const LogitRow& z_p, const Eigen::ArrayXd& p_probabilities,
                     const LogitSummary& p, const LogitRow& z_q, const LogitSummary& q) {
  const Eigen::ArrayXd zp = z_p.transpose().cast<double>().array();
  const double dot = (p_probabilities * (zp - z_q.transpose().cast<double>().array())).sum();
  return std::max(dot + (q.log_sum_exp - p.log_sum_exp) * p_probabilities.sum(), 0.0);
}

double next_token_kl(const LogitRow& z_p, const LogitSummary& p, const LogitRow& z_q,
                     const LogitSummary& q) {
  return next_token_kl(z_p, softmax_probabilities(z_p, p), p, z_q, q);
}

void ReferenceDistribution::keep_probabilities() {
  probabilities.resize(rows.size());
  for (size_t t = 0; t < rows.size(); ++t) {
    probabilities[t] = softmax_probabilities(logits.row(static_cast<Eigen::Index>(t)), rows[t]);
  }
}

ReferenceDistribution reference_distribution(RowMatrix logits) {
  ReferenceDistribution r;
  r.logits = std::move(logits);
  r.rows.reserve(static_cast<size_t>(r.logits.rows()));
  for (Eigen::Index t = 0; t < r.logits.rows(); ++t) {
    r.rows.push_back(summarize_logits(r.logits.row(t)));
  }
  return r;
}

}  // namespace kvplan
