// A profile as pairs: per layer, every (key, value) pair it may take with its real bytes, nominal
// bits and sensitivity; and the uniform configurations a plan is compared with. The search works
// on this view; the report reads a layer's pair sensitivities from it.
//
// A profile of side candidates ("q4_0/f32" keys only, "f32/q4_0" values only; the default) gives
// every layer the full product of its key formats and value formats, a pair's sensitivity being
// the sum of its sides (profile/dkl_estimate.h checks that). A profile of joint pairs (KVTuner's
// nine, `--candidates kvtuner`) gives exactly those pairs.
//
// Per KV head (KvGranularity::kHead), every (layer, KV head) is an entry of its own: its bytes are
// the layer's over its KV heads, its dKL the cell's dkl_heads (measured with that head alone
// quantized, or alpha_h * o_mse_h from them: profile/dkl_estimate.h). A profile with o_mse_heads
// but no dkl_heads apportions the layer's dKL by the heads' shares of o_mse instead (one alpha for
// every head). Cross terms between heads' errors, which W_o mixes, are what the validation loop's
// real measurements correct.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "formats/kv_pair.h"
#include "profile/profile_data.h"

namespace kvplan {

enum class SensitivityMetric { kDkl, kEo };

// What an entry of the search is: a whole layer (every KV head takes its pair), or one KV head of
// a layer.
enum class KvGranularity { kLayer, kHead };

struct LayerCandidate {
  KvPair pair;
  double bits = 0;             // KVTuner's equivalent bits of this layer: (k_bits + v_bits) / 2
  double bytes_per_token = 0;  // real bytes per token of this layer (all KV heads, K + V)
  double error = 0;            // sensitivity: dKL by default, e_o as an option
};

struct LayerCandidates {
  // The entry's number, which the search's groups name: the model layer; per KV head, the entry's
  // index (model_layer and head say which layer and head it is).
  int layer = 0;
  std::vector<LayerCandidate> candidates;
  int model_layer = -1;  // -1: `layer`
  int head = -1;         // the KV head; -1: every KV head of the layer

  [[nodiscard]] int layer_of_model() const { return model_layer < 0 ? layer : model_layer; }
};

// Throws Error(kInvalidArgument) for an incomplete profile (a shard: merge first), and per KV head
// for a metric other than dKL or a profile without per-head o_mse (written before it existed).
std::vector<LayerCandidates> candidates_from_profile(
    const Profile& profile, SensitivityMetric metric,
    KvGranularity granularity = KvGranularity::kLayer);

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
