#include "serve/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvplan::serve {

Sampler::Sampler(const SamplingParams& params) : params_(params), state_(params.seed) {}

// splitmix64: a fixed, portable sequence for a seed.
double Sampler::uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::next(const Eigen::Ref<const Eigen::RowVectorXf>& logits) {
  Eigen::Index best = 0;
  const float top = logits.maxCoeff(&best);
  if (params_.temperature <= 0) return static_cast<int32_t>(best);
  const auto n = static_cast<size_t>(logits.size());
  std::vector<double> p(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    p[i] = std::exp((static_cast<double>(logits[static_cast<Eigen::Index>(i)]) - top) /
                    params_.temperature);
    sum += p[i];
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  // The nucleus: most likely first, until its mass reaches top_p (at least one token).
  size_t kept = 0;
  double mass = 0;
  while (kept < n && (kept == 0 || mass < params_.top_p * sum)) mass += p[order[kept++]];
  double u = uniform() * mass;
  for (size_t i = 0; i < kept; ++i) {
    u -= p[order[i]];
    if (u < 0) return order[i];
  }
  return order[kept - 1];
}

}  // namespace kvplan::serve
