#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/pack.h"

namespace kvplan {

KvCacheOptions KvCacheOptions::uniform(const KvPair& pair, int n_layers,
                                       const QuantSettings& settings) {
  return per_layer(std::vector<KvPair>(static_cast<size_t>(n_layers), pair), settings);
}

KvCacheOptions KvCacheOptions::per_layer(std::vector<KvPair> pairs, const QuantSettings& settings) {
  KvCacheOptions o;
  o.exact = false;
  o.pairs = std::move(pairs);
  o.settings = settings;
  return o;
}

std::string KvCacheOptions::describe() const {
  if (exact) return "exact";
  if (pairs.empty()) return "none";
  const bool uniform =
      std::all_of(pairs.begin(), pairs.end(), [&](const KvPair& p) { return p == pairs[0]; });
  return uniform ? pairs[0].name() : fmt::format("mixed ({} layers)", pairs.size());
}

LayerKvCache::LayerKvCache(int layer, int n_kv_heads, int head_dim, bool exact, KvPair pair,
                           const QuantSettings& settings, KvHeadScales fp8_scales)
    : layer_(layer),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      exact_(exact),
      pair_(pair),
      settings_(settings),
      fp8_scales_(std::move(fp8_scales)) {
  if (exact_) return;
  settings_.validate();
  check_fp8_scales(fp8_scales_, pair_, n_kv_heads_, fmt::format("layer {}", layer));
  const size_t hd = static_cast<size_t>(head_dim);
  const size_t g = settings_.group_size;
  check_layer_settings(pair_, settings_, fmt::format("layer {}", layer));
  kivi_ = layer_runs_kivi(pair_, settings_);
  const bool kivi = kivi_;
  // Validate both formats up front, so a bad pair fails before any token is computed.
  auto check = [&](const char* which, Format f, size_t n_values, size_t group) {
    if (f.is_slot()) {
      fail(ErrorCode::kInvalidArgument,
           "layer {}: {} format {}: an opaque slot cannot be "
           "simulated by the harness",
           layer, which, f.name());
    }
    try {
      return packed_row_bytes(f, n_values, group);
    } catch (const Error& e) {
      fail(ErrorCode::kInvalidArgument, "layer {}: {} format {} (head_dim {}, {}): {}", layer,
           which, f.name(), head_dim, kivi && which[0] == 'k' ? "per-channel groups" : "per token",
           e.what());
    }
  };
  const size_t key_bytes = kivi ? check("key", pair.key, g, g) * hd : check("key", pair.key, hd, g);
  const size_t value_bytes = check("value", pair.value, hd, g);
  scratch_.resize(std::max(key_bytes, value_bytes));
}

void LayerKvCache::reserve(size_t tokens) {
  if (tokens <= capacity_) return;
  size_t cap = std::max<size_t>(capacity_ * 2, 64);
  while (cap < tokens) cap *= 2;
  const size_t hd = static_cast<size_t>(head_dim_);
  std::vector<float> k(static_cast<size_t>(n_kv_heads_) * cap * hd);
  std::vector<float> v(k.size());
  // Nothing to move from an empty cache, whose buffers may be null (memcpy's source must not be).
  for (int h = 0; n_tokens_ > 0 && h < n_kv_heads_; ++h) {
    std::memcpy(k.data() + h * cap * hd, k_.data() + head_offset(h),
                n_tokens_ * hd * sizeof(float));
    std::memcpy(v.data() + h * cap * hd, v_.data() + head_offset(h),
                n_tokens_ * hd * sizeof(float));
  }
  k_.swap(k);
  v_.swap(v);
  capacity_ = cap;
}

void LayerKvCache::append(const float* k, const float* v, size_t n, size_t row_stride) {
  reserve(n_tokens_ + n);
  const size_t hd = static_cast<size_t>(head_dim_);
  for (int h = 0; h < n_kv_heads_; ++h) {
    float* kd = k_.data() + head_offset(h) + n_tokens_ * hd;
    float* vd = v_.data() + head_offset(h) + n_tokens_ * hd;
    for (size_t t = 0; t < n; ++t) {
      std::memcpy(kd + t * hd, k + t * row_stride + h * hd, hd * sizeof(float));
      std::memcpy(vd + t * hd, v + t * row_stride + h * hd, hd * sizeof(float));
    }
  }
  n_tokens_ += n;
}

void LayerKvCache::commit() {
  if (exact_) {
    n_committed_ = n_tokens_;
    return;
  }
  if (!kivi_) {
    quantize_per_token(n_committed_, n_tokens_);
    n_committed_ = n_tokens_;
    return;
  }
  const size_t window = settings_.residual_length;
  while (n_tokens_ - n_committed_ >= window) {
    quantize_kivi_window(n_committed_, n_committed_ + window);
    n_committed_ += window;
  }
}

void LayerKvCache::quantize_per_token(size_t begin, size_t end) {
  const size_t hd = static_cast<size_t>(head_dim_);
  const size_t kb = packed_row_bytes(pair_.key, hd, settings_.group_size);
  const size_t vb = packed_row_bytes(pair_.value, hd, settings_.group_size);
  for (int h = 0; h < n_kv_heads_; ++h) {
    const PackOptions kopt{.group_size = settings_.group_size,
                           .fp8_scale = fp8_scales_.key_scale(h)};
    const PackOptions vopt{.group_size = settings_.group_size,
                           .fp8_scale = fp8_scales_.value_scale(h)};
    for (size_t t = begin; t < end; ++t) {
      std::span<float> krow(k_.data() + head_offset(h) + t * hd, hd);
      std::span<float> vrow(v_.data() + head_offset(h) + t * hd, hd);
      pack_row(pair_.key, krow, std::span<uint8_t>(scratch_.data(), kb), kopt);
      unpack_row(pair_.key, std::span<const uint8_t>(scratch_.data(), kb), krow, kopt);
      pack_row(pair_.value, vrow, std::span<uint8_t>(scratch_.data(), vb), vopt);
      unpack_row(pair_.value, std::span<const uint8_t>(scratch_.data(), vb), vrow, vopt);
    }
  }
}

void LayerKvCache::quantize_kivi_window(size_t begin, size_t end) {
  const size_t hd = static_cast<size_t>(head_dim_);
  const size_t g = settings_.group_size;
  const size_t channel_bytes = channel_group_bytes(pair_.key, hd, g);
  const size_t vb = packed_row_bytes(pair_.value, hd, g);
  for (int h = 0; h < n_kv_heads_; ++h) {
    const PackOptions kopt{.group_size = g, .fp8_scale = fp8_scales_.key_scale(h)};
    const PackOptions vopt{.group_size = g, .fp8_scale = fp8_scales_.value_scale(h)};
    // Keys: per channel over each group of g consecutive tokens ([g, head_dim] block, stride hd).
    for (size_t t = begin; t + g <= end; t += g) {
      float* block = k_.data() + head_offset(h) + t * hd;
      std::span<uint8_t> bytes(scratch_.data(), channel_bytes);
      pack_channels(pair_.key, block, g, hd, hd, bytes, kopt);
      unpack_channels(pair_.key, bytes, g, hd, block, hd, kopt);
    }
    for (size_t t = begin; t < end; ++t) {
      std::span<float> vrow(v_.data() + head_offset(h) + t * hd, hd);
      pack_row(pair_.value, vrow, std::span<uint8_t>(scratch_.data(), vb), vopt);
      unpack_row(pair_.value, std::span<const uint8_t>(scratch_.data(), vb), vrow, vopt);
    }
  }
}

KvCache::KvCache(const ModelConfig& config, const KvCacheOptions& options) : options_(options) {
  if (!options.exact && options.pairs.size() != static_cast<size_t>(config.n_layers)) {
    fail(ErrorCode::kInvalidArgument, "KV cache: {} layer pairs given, the model has {} layers",
         options.pairs.size(), config.n_layers);
  }
  if (!options.exact && !options.fp8_scales.empty() &&
      options.fp8_scales.size() != static_cast<size_t>(config.n_layers)) {
    fail(ErrorCode::kInvalidArgument, "KV cache: FP8 scales for {} layers, the model has {} layers",
         options.fp8_scales.size(), config.n_layers);
  }
  layers_.reserve(static_cast<size_t>(config.n_layers));
  for (int l = 0; l < config.n_layers; ++l) {
    const size_t L = static_cast<size_t>(l);
    layers_.emplace_back(
        l, config.n_kv_heads[L], config.head_dim, options.exact,
        options.exact ? KvPair{} : options.pairs[L], options.settings,
        options.exact || options.fp8_scales.empty() ? KvHeadScales{} : options.fp8_scales[L]);
  }
}

void KvCache::clear() {
  for (LayerKvCache& l : layers_) l.clear();
}

}  // namespace kvplan
