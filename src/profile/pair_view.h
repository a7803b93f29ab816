// A profile as pairs: per layer, every (key, value) pair it may take with its real bytes, nominal
// bits and sensitivity; and the uniform configurations a plan is compared with. The search works
// on this view; the report reads a layer's pair sensitivities from it.
//
// A profile of side candidates ("q4_0/f32" keys only, "f32/q4_0" values only; the default) gives
// every layer the full product of its key formats and value formats, a pair's sensitivity being
// the sum of its sides (profile/dkl_estimate.h checks that). A profile of joint pairs (KVTuner's
// nine, `--candidates kvtuner`) gives exactly those pairs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "formats/kv_pair.h"
#include "profile/profile_data.h"

namespace kvplan {

enum class SensitivityMetric { kDkl, kEo };

struct LayerCandidate {
  KvPair pair;
  double bits = 0;             // KVTuner's equivalent bits of this layer: (k_bits + v_bits) / 2
  double bytes_per_token = 0;  // real bytes per token of this layer (all KV heads, K + V)
  double error = 0;            // sensitivity: dKL by default, e_o as an option
};

struct LayerCandidates {
  int layer = 0;
  std::vector<LayerCandidate> candidates;
};

// Throws Error(kInvalidArgument) for an incomplete profile (a shard: merge first).
std::vector<LayerCandidates> candidates_from_profile(const Profile& profile,
                                                     SensitivityMetric metric);

// A uniform configuration: the same pair on every layer.
struct UniformConfig {
  KvPair pair;
  double bytes_per_token = 0;  // summed over layers
  double equivalent_bits = 0;  // KVTuner's mean nominal bits
  double predicted_error = 0;  // sum over layers of the pair's sensitivity
  std::vector<double> layer_errors;
};

// Every pair that all layers offer, applied uniformly, sorted by predicted error (then bytes,
// then name).
std::vector<UniformConfig> uniform_configs(const std::vector<LayerCandidates>& layers);

// The smallest bytes per token any per-layer choice can take.
double smallest_bytes_per_token(const std::vector<LayerCandidates>& layers);

}  // namespace kvplan
