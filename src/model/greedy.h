// The greedy choice over one row of logits: the highest logit, the lowest id among ties. Every
// greedy decoder in kvplan (generate, eval's pass-key, bench kv, bench serve) takes its token here,
// so they agree token for token.
//
//   const int32_t next = greedy_token(logits.row(logits.rows() - 1));
#pragma once

#include <cstdint>

#include <Eigen/Core>

namespace kvplan {

inline int32_t greedy_token(const Eigen::Ref<const Eigen::RowVectorXf>& logits) {
  Eigen::Index best = 0;
  logits.maxCoeff(&best);
  return static_cast<int32_t>(best);
}

}  // namespace kvplan
