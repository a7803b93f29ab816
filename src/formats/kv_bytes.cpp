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

uint64_t kv_cache_bytes(const KvGeometry& geometry, std::span<const KvPair> pairs,
                        const QuantSettings& settings, int64_t tokens, int64_t sequences) {
  if (pairs.size() != geometry.layers.size()) {
    fail(ErrorCode::kInvalidArgument, "{} layer formats given for a model with {} layers",
         pairs.size(), geometry.layers.size());
  }
  if (sequences < 0) fail(ErrorCode::kInvalidArgument, "sequences {}: expected >= 0", sequences);
  uint64_t per_sequence = 0;
  for (size_t l = 0; l < pairs.size(); ++l) {
    per_sequence +=
        layer_kv_bytes(geometry.layers[l], pairs[l], settings, tokens, static_cast<int>(l));
  }
  return per_sequence * static_cast<uint64_t>(sequences);
}

double kv_bytes_per_token(const KvGeometry& geometry, std::span<const KvPair> pairs,
                          const QuantSettings& settings) {
  double total = 0;
  for (size_t l = 0; l < pairs.size() && l < geometry.layers.size(); ++l) {
    total +=
        layer_bytes_per_token(geometry.layers[l], pairs[l], settings, static_cast<int>(l)).total();
  }
  return total;
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
