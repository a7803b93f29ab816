// Rotary position embeddings (RoFormer, Su et al. 2021) in the two layouts checkpoints use, with
// linear and Llama-3 frequency scaling.
//
// Frequencies: inv_freq[i] = theta^(-2i / head_dim), i in [0, head_dim/2). Llama 3 scaling (Meta's
// reference): wavelengths shorter than original_context / high_freq_factor keep their frequency,
// longer than original_context / low_freq_factor are divided by `factor`, in between they blend
// smoothly. GGUF llama-3 files instead carry per-frequency divisors in rope_freqs.weight.
//
//   kvplan::RopeTable rope(config, freq_factors);
//   rope.prepare(pos0, n_tokens);
//   rope.apply(row, t, n_heads);   // row = [n_heads, head_dim] of token t of the chunk
#pragma once

#include <cmath>
#include <span>
#include <vector>

#include "model/model_config.h"

namespace kvplan {

class RopeTable {
 public:
  RopeTable(const ModelConfig& config, std::span<const float> freq_factors)
      : layout_(config.rope_layout), head_dim_(config.head_dim) {
    const int half = head_dim_ / 2;
    inv_freq_.resize(static_cast<size_t>(half));
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < half; ++i) {
      double f = std::pow(config.rope_theta, -2.0 * i / head_dim_);
      if (!freq_factors.empty()) f /= freq_factors[static_cast<size_t>(i)];
      if (config.rope_scaling == RopeScaling::kLinear) f /= config.rope_factor;
      if (config.rope_scaling == RopeScaling::kLlama3 && freq_factors.empty()) {
        const double orig = static_cast<double>(config.rope_original_context);
        const double low_wavelen = orig / config.rope_low_freq_factor;
        const double high_wavelen = orig / config.rope_high_freq_factor;
        const double wavelen = 2 * pi / f;
        if (wavelen > low_wavelen) {
          f /= config.rope_factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth = (orig / wavelen - config.rope_low_freq_factor) /
                                (config.rope_high_freq_factor - config.rope_low_freq_factor);
          f = (1 - smooth) * f / config.rope_factor + smooth * f;
        }
      }
      inv_freq_[static_cast<size_t>(i)] = f;
    }
  }

  // cos/sin for positions pos0 .. pos0 + n - 1: [n, head_dim/2].
  void prepare(size_t pos0, size_t n) {
    const size_t half = inv_freq_.size();
    cos_.resize(n * half);
    sin_.resize(n * half);
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos0 + t) * inv_freq_[i];
        cos_[t * half + i] = static_cast<float>(std::cos(angle));
        sin_[t * half + i] = static_cast<float>(std::sin(angle));
      }
    }
  }

  // Rotates `n_heads` consecutive heads of chunk token t in place.
  void apply(float* row, size_t t, int n_heads) const {
    const size_t half = inv_freq_.size();
    const float* c = cos_.data() + t * half;
    const float* s = sin_.data() + t * half;
    for (int h = 0; h < n_heads; ++h) {
      float* x = row + static_cast<size_t>(h) * static_cast<size_t>(head_dim_);
      if (layout_ == RopeLayout::kAdjacentPairs) {
        for (size_t i = 0; i < half; ++i) {
          const float x0 = x[2 * i], x1 = x[2 * i + 1];
          x[2 * i] = x0 * c[i] - x1 * s[i];
          x[2 * i + 1] = x0 * s[i] + x1 * c[i];
        }
      } else {
        for (size_t i = 0; i < half; ++i) {
          const float x0 = x[i], x1 = x[i + half];
          x[i] = x0 * c[i] - x1 * s[i];
          x[i + half] = x0 * s[i] + x1 * c[i];
        }
      }
    }
  }

 private:
  RopeLayout layout_;
  int head_dim_;
  std::vector<double> inv_freq_;
  std::vector<float> cos_, sin_;
};

}  // namespace kvplan
