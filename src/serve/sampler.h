// Choosing the next token from logits, as OpenAI-style requests ask: greedy (temperature 0), or a
// draw from softmax(logits / temperature) cut to the smallest set of most likely tokens whose
// probability reaches top_p. A seeded sampler draws the same tokens from the same logits on every
// machine (its own generator and uniform draw, no std:: distribution).
//
//   Sampler s({.temperature = 0.7, .top_p = 0.9, .seed = 42});
//   int32_t next = s.next(logits_row);
#pragma once

#include <cstdint>

#include <Eigen/Core>

namespace kvplan::serve {

struct SamplingParams {
  double temperature = 0;  // 0: greedy (argmax, ties to the lower id)
  double top_p = 1;        // (0, 1]
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int32_t next(const Eigen::Ref<const Eigen::RowVectorXf>& logits);

 private:
  double uniform();  // [0, 1), 53 bits
  SamplingParams params_;
  uint64_t state_;
};

}  // namespace kvplan::serve
