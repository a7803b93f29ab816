// KV-cache memory: exact bytes for a model geometry, a per-layer format assignment, quantization
// settings, a context length and a number of sequences — the answer to "how much memory will this
// KV cache take?" and "how many tokens fit?".
//
//   auto g = kvplan::KvGeometry::uniform("m", 32, 8, 128);
//   std::vector<kvplan::KvPair> layers(32, kvplan::KvPair::parse("KV16"));
//   kvplan::kv_cache_bytes(g, layers, {}, 32768, 1);  // 4 GiB
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "formats/kv_geometry.h"
#include "formats/kv_pair.h"
#include "formats/quant_settings.h"

namespace kvplan {

// Steady-state bytes per token of one layer (all its KV heads), K and V separately. On a KIVI layer
// (layer_runs_kivi) the key bytes are the per-channel groups amortised over group_size tokens; a
// slot reports its whole K+V record as key bytes and 0 value bytes.
struct LayerTokenBytes {
  double key = 0;
  double value = 0;
  [[nodiscard]] double total() const { return key + value; }
};

// Throws Error(kInvalidArgument) naming the layer, K or V, and the format when a format cannot
// pack this layer's rows (e.g. q4_0 on head_dim 8) or the settings cannot hold the layer
// (check_layer_settings).
LayerTokenBytes layer_bytes_per_token(const KvLayerGeometry& layer, const KvPair& pair,
                                      const QuantSettings& settings, int layer_index);

// The same for a layer whose KV heads take different pairs (per-KV-head plans): the sum of each
// head's bytes, one pair per KV head in `head_pairs`.
LayerTokenBytes layer_heads_bytes_per_token(const KvLayerGeometry& layer,
                                            std::span<const KvPair> head_pairs,
                                            const QuantSettings& settings, int layer_index);

// Exact bytes one sequence of `tokens` tokens keeps in this layer: the sliding window caps the
// tokens kept, pages round the count up to block_size, and kivi's residual tokens are bf16.
uint64_t layer_kv_bytes(const KvLayerGeometry& layer, const KvPair& pair,
                        const QuantSettings& settings, int64_t tokens, int layer_index);

// Sum over layers, times `sequences`. `pairs` is a KV configuration: one pair per layer, or one per
// KV head (layer-major; per-KV-head plans). Error(kInvalidArgument) for any other count.
uint64_t kv_cache_bytes(const KvGeometry& geometry, std::span<const KvPair> pairs,
                        const QuantSettings& settings, int64_t tokens, int64_t sequences);

// K and V values per token summed over layers: effective bits = 8 * bytes / values.
double kv_values_per_token(const KvGeometry& geometry);

// Steady-state bytes per token summed over layers (windows ignored); `pairs` as kv_cache_bytes.
double kv_bytes_per_token(const KvGeometry& geometry, std::span<const KvPair> pairs,
                          const QuantSettings& settings);

// KVTuner's equivalent bits of a configuration (as kv_cache_bytes takes it): nominal bits averaged
// over every K and V value.
double kv_equivalent_bits(const KvGeometry& geometry, std::span<const KvPair> pairs);

// The largest context per sequence such that `sequences` sequences fit in `available_bytes`
// (0 if not even one token fits). Capped at `max_tokens`.
int64_t max_tokens_that_fit(const KvGeometry& geometry, std::span<const KvPair> pairs,
                            const QuantSettings& settings, uint64_t available_bytes,
                            int64_t sequences, int64_t max_tokens = int64_t{1} << 34);

}  // namespace kvplan
