// Synthetic search spaces with known structure, built from fresh random numbers.
#pragma once

#include <random>
#include <vector>

#include "search/candidates.h"

namespace kvplan::search::test {

// Nine int pairs per layer with errors that fall as bits rise, keys weighing `key_weight` times
// more than values, and a per-layer sensitivity scale.
inline std::vector<LayerCandidates> int_pair_layers(int n_layers, uint32_t seed,
                                                    double key_weight = 3.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> scale(0.2, 2.0), jitter(0.9, 1.1);
  const char* names[] = {"KV8", "K8V4", "K8V2", "K4V8", "KV4", "K4V2", "K2V8", "K2V4", "KV2"};
  std::vector<LayerCandidates> layers;
  for (int l = 0; l < n_layers; ++l) {
    const double s = scale(rng);
    LayerCandidates lc{l, {}};
    for (const char* name : names) {
      const KvPair p = KvPair::parse(name);
      const double kb = p.key.nominal_bits(64), vb = p.value.nominal_bits(64);
      const double err = s * (key_weight * std::exp2(-kb) + std::exp2(-vb)) * jitter(rng);
      lc.candidates.push_back({p, (kb + vb) / 2, 3 * 64 * (kb + vb) / 8 + 24, err});
    }
    layers.push_back(std::move(lc));
  }
  return layers;
}

}  // namespace kvplan::search::test
