#include "formats/kv_bytes.h"

#include "core/error.h"
#include "formats/format_size.h"

namespace kvplan {
namespace {

constexpr uint64_t kResidualBytesPerValue = 2;  // kivi's full-precision window is bf16

// Runs a size computation of src/formats, naming the layer and side in its error.
template <typename Size>
uint64_t bytes_for(int layer_index, const char* which, Size&& size) {
  try {
    return size();
  } catch (const Error& e) {
    fail(e.code(), "layer {} {}: {}", layer_index, which, e.what());
  }
}

uint64_t row_bytes_for(const Format& format, size_t n, size_t group, int layer_index,
                       const char* which) {
  return bytes_for(layer_index, which, [&] { return packed_row_bytes(format, n, group); });
}

uint64_t key_group_bytes_for(const Format& key, size_t dim, size_t group, int layer_index) {
  return bytes_for(layer_index, "key", [&] { return channel_group_bytes(key, dim, group); });
}

}  // namespace

LayerTokenBytes layer_bytes_per_token(const KvLayerGeometry& layer, const KvPair& pair,
                                      const QuantSettings& settings, int layer_index) {
  const double heads = layer.n_kv_heads;
  const size_t dim = static_cast<size_t>(layer.head_dim);
  if (pair.is_slot()) return {heads * pair.key.slot_bytes(), 0.0};
  check_layer_settings(pair, settings, fmt::format("layer {}", layer_index));
  LayerTokenBytes bytes;
  bytes.value = heads * static_cast<double>(row_bytes_for(pair.value, dim, settings.group_size,
                                                          layer_index, "value"));
  if (keys_packed_per_channel(pair, settings)) {
    const size_t g = settings.group_size;
    bytes.key = heads * static_cast<double>(key_group_bytes_for(pair.key, dim, g, layer_index)) /
                static_cast<double>(g);
  } else {
    bytes.key = heads * static_cast<double>(
                            row_bytes_for(pair.key, dim, settings.group_size, layer_index, "key"));
  }
  return bytes;
}

LayerTokenBytes layer_heads_bytes_per_token(const KvLayerGeometry& layer,
                                            std::span<const KvPair> head_pairs,
                                            const QuantSettings& settings, int layer_index) {
  if (head_pairs.size() != static_cast<size_t>(layer.n_kv_heads)) {
    fail(ErrorCode::kInvalidArgument, "layer {}: {} KV head pairs, the layer has {} KV heads",
         layer_index, head_pairs.size(), layer.n_kv_heads);
  }
  KvLayerGeometry one = layer;
  one.n_kv_heads = 1;
  LayerTokenBytes sum;
  for (const KvPair& pair : head_pairs) {
    const LayerTokenBytes b = layer_bytes_per_token(one, pair, settings, layer_index);
    sum.key += b.key;
    sum.value += b.value;
  }
  return sum;
}

uint64_t layer_kv_bytes(const KvLayerGeometry& layer, const KvPair& pair,
                        const QuantSettings& settings, int64_t tokens, int layer_index) {
  if (tokens < 0) fail(ErrorCode::kInvalidArgument, "token count {}: expected >= 0", tokens);
  int64_t kept = tokens;
  if (layer.sliding_window > 0 && kept > layer.sliding_window) kept = layer.sliding_window;
  const int64_t block = static_cast<int64_t>(settings.block_size);
  const uint64_t t = static_cast<uint64_t>((kept + block - 1) / block * block);
  const uint64_t heads = static_cast<uint64_t>(layer.n_kv_heads);
  const size_t dim = static_cast<size_t>(layer.head_dim);
  if (pair.is_slot()) return t * heads * pair.key.slot_bytes();

  check_layer_settings(pair, settings, fmt::format("layer {}", layer_index));
  const bool kivi = layer_runs_kivi(pair, settings);
  // KIVI keeps the tokens that do not yet fill a residual window in full precision (K and V).
  const uint64_t residual = kivi ? t % settings.residual_length : 0;
  const uint64_t quantized = t - residual;
  const uint64_t residual_bytes = residual * heads * dim * kResidualBytesPerValue * 2;

  const uint64_t value_row =
      row_bytes_for(pair.value, dim, settings.group_size, layer_index, "value");
  uint64_t key_bytes;
  if (keys_packed_per_channel(pair, settings)) {
    const size_t g = settings.group_size;
    key_bytes = quantized / g * heads * key_group_bytes_for(pair.key, dim, g, layer_index);
  } else {
    key_bytes =
        quantized * heads * row_bytes_for(pair.key, dim, settings.group_size, layer_index, "key");
  }
  return key_bytes + quantized * heads * value_row + residual_bytes;
}

double kv_values_per_token(const KvGeometry& geometry) {
  double values = 0;
  for (const KvLayerGeometry& l : geometry.layers) values += 2.0 * l.n_kv_heads * l.head_dim;
  return values;
}

namespace {

// Calls fn(geometry, pair, layer index) for each layer of a configuration with one pair per layer,
// or for each KV head (as a layer of one head: its pages hold exactly that head's bytes) of one
// with a pair per KV head.
template <typename Fn>
void for_each_config_entry(const KvGeometry& geometry, std::span<const KvPair> pairs, Fn&& fn) {
  if (pairs.size() == geometry.layers.size()) {
    for (size_t l = 0; l < pairs.size(); ++l) fn(geometry.layers[l], pairs[l], static_cast<int>(l));
    return;
  }
  if (pairs.size() != static_cast<size_t>(geometry.n_kv_heads_total())) {
    fail(ErrorCode::kInvalidArgument,
         "{} formats given for a model with {} layers ({} KV heads): expected one per layer or "
         "one per KV head",
         pairs.size(), geometry.layers.size(), geometry.n_kv_heads_total());
  }
  size_t next = 0;
  for (size_t l = 0; l < geometry.layers.size(); ++l) {
    KvLayerGeometry one = geometry.layers[l];
    one.n_kv_heads = 1;
    for (int h = 0; h < geometry.layers[l].n_kv_heads; ++h) {
      fn(one, pairs[next++], static_cast<int>(l));
    }
  }
}

}  // namespace

uint64_t kv_cache_bytes(const KvGeometry& geometry, std::span<const KvPair> pairs,
                        const QuantSettings& settings, int64_t tokens, int64_t sequences) {
  if (sequences < 0) fail(ErrorCode::kInvalidArgument, "sequences {}: expected >= 0", sequences);
  uint64_t per_sequence = 0;
  for_each_config_entry(geometry, pairs, [&](const KvLayerGeometry& g, const KvPair& p, int l) {
    per_sequence += layer_kv_bytes(g, p, settings, tokens, l);
  });
  return per_sequence * static_cast<uint64_t>(sequences);
}

double kv_bytes_per_token(const KvGeometry& geometry, std::span<const KvPair> pairs,
                          const QuantSettings& settings) {
  double total = 0;
  for_each_config_entry(geometry, pairs, [&](const KvLayerGeometry& g, const KvPair& p, int l) {
    total += layer_bytes_per_token(g, p, settings, l).total();
  });
  return total;
}

double kv_equivalent_bits(const KvGeometry& geometry, std::span<const KvPair> pairs) {
  if (geometry.layers.empty()) return 0;
  // Per layer its pair's bits (or its heads' mean), then the mean over layers: KVTuner's.
  std::vector<double> layer_bits(geometry.layers.size(), 0.0);
  for_each_config_entry(geometry, pairs, [&](const KvLayerGeometry& g, const KvPair& p, int l) {
    const int heads = geometry.layers[static_cast<size_t>(l)].n_kv_heads;
    layer_bits[static_cast<size_t>(l)] +=
        g.n_kv_heads == heads ? p.nominal_bits(g.head_dim) : p.nominal_bits(g.head_dim) / heads;
  });
  double bits = 0;
  for (const double b : layer_bits) bits += b;
  return bits / static_cast<double>(geometry.layers.size());
}

int64_t max_tokens_that_fit(const KvGeometry& geometry, std::span<const KvPair> pairs,
                            const QuantSettings& settings, uint64_t available_bytes,
                            int64_t sequences, int64_t max_tokens) {
  if (sequences <= 0) fail(ErrorCode::kInvalidArgument, "sequences {}: expected > 0", sequences);
  // Bytes grow monotonically with tokens: binary search the largest count that fits.
  int64_t lo = 0, hi = max_tokens;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (kv_cache_bytes(geometry, pairs, settings, mid, sequences) <= available_bytes) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace kvplan
