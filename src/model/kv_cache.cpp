#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/math/hadamard.h"

namespace kvplan {
namespace {

const KvPair kExactPair{Format(FormatId::kF32), Format(FormatId::kF32)};

// The layer's pages, after the checks whose messages name what the harness cannot hold.
KvPageLayout checked_pages(int layer, const KvLayerGeometry& geometry, bool exact,
                           const KvPair& pair, const QuantSettings& settings,
                           KvHeadScales fp8_scales) {
  if (exact) return KvPageLayout(layer, geometry, kExactPair, {}, QuantSettings{});
  settings.validate();
  check_fp8_scales(fp8_scales, pair, geometry.n_kv_heads, fmt::format("layer {}", layer));
  check_layer_settings(pair, settings, fmt::format("layer {}", layer));
  const bool kivi = layer_runs_kivi(pair, settings);
  const size_t hd = static_cast<size_t>(geometry.head_dim);
  const size_t g = settings.group_size;
  // Validate both formats up front, so a bad pair fails before any token is computed.
  const auto check = [&](const char* which, Format f, size_t n_values, size_t group) {
    if (f.is_slot()) {
      fail(ErrorCode::kInvalidArgument,
           "layer {}: {} format {}: an opaque slot cannot be simulated by the harness", layer,
           which, f.name());
    }
    try {
      (void)packed_row_bytes(f, n_values, group);
    } catch (const Error& e) {
      fail(ErrorCode::kInvalidArgument, "layer {}: {} format {} (head_dim {}, {}): {}", layer,
           which, f.name(), geometry.head_dim,
           kivi && which[0] == 'k' ? "per-channel groups" : "per token", e.what());
    }
  };
  if (kivi) {
    check("key", pair.key, g, g);
  } else {
    check("key", pair.key, hd, g);
  }
  check("value", pair.value, hd, g);
  // Pages hold whole per-channel key groups: block_size rounded up to the group.
  QuantSettings paged = settings;
  paged.round_block_to_group();
  return KvPageLayout(layer, geometry, pair, std::move(fp8_scales), paged);
}

}  // namespace

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

LayerKvCache::LayerKvCache(int layer, const KvLayerGeometry& geometry, bool exact, KvPair pair,
                           const QuantSettings& settings, KvHeadScales fp8_scales)
    : layer_(layer),
      exact_(exact),
      window_(geometry.sliding_window),
      pages_(checked_pages(layer, geometry, exact, pair, settings, std::move(fp8_scales))),
      kivi_(!exact && layer_runs_kivi(pair, settings)) {}

void LayerKvCache::clear() {
  n_tokens_ = n_committed_ = 0;
  first_held_page_ = 0;
  k_pages_.clear();
  v_pages_.clear();
  k_staging_.clear();
  v_staging_.clear();
}

void LayerKvCache::append(const float* k, const float* v, size_t n, size_t row_stride) {
  // Queries from here on start at n_tokens_: keys behind the window are never read again.
  if (window_ > 0 && n_tokens_ + 1 > static_cast<size_t>(window_)) {
    free_pages_before(n_tokens_ + 1 - static_cast<size_t>(window_));
  }
  const size_t width = row_floats();
  const size_t staged = k_staging_.size() / width;
  k_staging_.resize((staged + n) * width);
  v_staging_.resize((staged + n) * width);
  for (size_t t = 0; t < n; ++t) {
    std::memcpy(k_staging_.data() + (staged + t) * width, k + t * row_stride,
                width * sizeof(float));
    std::memcpy(v_staging_.data() + (staged + t) * width, v + t * row_stride,
                width * sizeof(float));
  }
  n_tokens_ += n;
}

void LayerKvCache::commit() {
  size_t due = n_tokens_ - n_committed_;
  if (kivi_) {
    const size_t window = pages_.settings().residual_length;
    due -= due % window;  // whole windows; the rest stays exact in staging
  }
  if (due == 0) return;
  pack_into_pages(n_committed_, due);
  const size_t width = row_floats();
  for (std::vector<float>* staging : {&k_staging_, &v_staging_}) {
    staging->erase(staging->begin(), staging->begin() + static_cast<std::ptrdiff_t>(due * width));
    // A long prefill's rows are gone once packed: give their memory back, so that what the cache
    // holds is its pages (and at most KIVI's residual window).
    if (staging->empty()) {
      std::vector<float>().swap(*staging);
    } else if (staging->capacity() > 2 * staging->size() + 64 * width) {
      staging->shrink_to_fit();
    }
  }
  n_committed_ += due;
}

void LayerKvCache::ensure_pages(size_t tokens) {
  const size_t needed = (tokens + block() - 1) / block();
  while (k_pages_.size() < needed) {
    // Not zeroed: a page's bytes are written before they are read, and untouched memory stays
    // unresident until then.
    k_pages_.push_back(std::make_unique_for_overwrite<uint8_t[]>(pages_.page_bytes(KvSide::kKey)));
    v_pages_.push_back(
        std::make_unique_for_overwrite<uint8_t[]>(pages_.page_bytes(KvSide::kValue)));
  }
}

// Packs staged tokens [first, first + n) (first == n_committed_) into their pages, page by page:
// windows and pages both start at multiples of group_size, so per-channel keys get whole groups.
void LayerKvCache::pack_into_pages(size_t first, size_t n) {
  ensure_pages(first + n);
  const size_t width = row_floats();
  for (size_t t = first; t < first + n;) {
    const size_t p = t / block();
    const size_t end = std::min(first + n, (p + 1) * block());
    const size_t row = t - first;
    pages_.pack_tokens(KvSide::kKey, k_pages_[p].get(), t - p * block(), end - t,
                       k_staging_.data() + row * width, width);
    pages_.pack_tokens(KvSide::kValue, v_pages_[p].get(), t - p * block(), end - t,
                       v_staging_.data() + row * width, width);
    t = end;
  }
}

void LayerKvCache::free_pages_before(size_t token) {
  // Only committed pages wholly behind `token` go; staging is never behind a window.
  const size_t last = std::min(token, n_committed_) / block();
  for (; first_held_page_ < last; ++first_held_page_) {
    k_pages_[first_held_page_].reset();
    v_pages_[first_held_page_].reset();
  }
}

void LayerKvCache::read(KvSide side, int head, size_t first, size_t n, float* out,
                        std::span<float> scratch, bool rotated_domain) const {
  if (first < first_held_token() || first + n > n_tokens_) {
    fail(ErrorCode::kInternal, "layer {}: read of tokens [{}, {}) outside the held [{}, {})",
         layer_, first, first + n, first_held_token(), n_tokens_);
  }
  const size_t dim = static_cast<size_t>(head_dim());
  size_t t = first;
  for (; t < first + n && t < n_committed_;) {
    const size_t p = t / block();
    const size_t end = std::min({first + n, n_committed_, (p + 1) * block()});
    pages_.unpack_head(side, page(side, p), head, t - p * block(), end - t, out + (t - first) * dim,
                       scratch, rotated_domain);
    t = end;
  }
  const std::vector<float>& staging = side == KvSide::kKey ? k_staging_ : v_staging_;
  const size_t width = row_floats();
  const int span = rotated_domain ? rotation_span(side) : 0;
  for (; t < first + n; ++t) {
    float* row = out + (t - first) * dim;
    std::memcpy(row, staging.data() + (t - n_committed_) * width + static_cast<size_t>(head) * dim,
                dim * sizeof(float));
    if (span > 0) hadamard_transform_spans(row, head_dim(), span);
  }
}

size_t LayerKvCache::bytes_held() const {
  const size_t held_pages = k_pages_.size() - first_held_page_;
  return held_pages * (pages_.page_bytes(KvSide::kKey) + pages_.page_bytes(KvSide::kValue)) +
         (k_staging_.capacity() + v_staging_.capacity()) * sizeof(float);
}

const uint8_t* LayerKvCache::page(KvSide side, size_t p) const {
  const auto& pages = side == KvSide::kKey ? k_pages_ : v_pages_;
  if (p >= pages.size() || !pages[p]) {
    fail(ErrorCode::kInternal, "layer {}: page {} is not held", layer_, p);
  }
  return pages[p].get();
}

uint8_t* LayerKvCache::page(KvSide side, size_t p) {
  return const_cast<uint8_t*>(std::as_const(*this).page(side, p));
}

void LayerKvCache::adopt_committed(size_t n) {
  if (n_tokens_ != 0) {
    fail(ErrorCode::kInternal, "layer {}: a prefix is adopted by an empty cache, this one holds {}",
         layer_, n_tokens_);
  }
  if (n % block() != 0 || (kivi_ && n % pages_.settings().residual_length != 0)) {
    fail(ErrorCode::kInvalidArgument,
         "layer {}: an adopted prefix of {} tokens is not whole pages of {}{}", layer_, n, block(),
         kivi_ ? fmt::format(" and KIVI windows of {}", pages_.settings().residual_length) : "");
  }
  ensure_pages(n);
  n_tokens_ = n_committed_ = n;
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
  const KvGeometry geometry = kv_geometry(config);
  layers_.reserve(static_cast<size_t>(config.n_layers));
  for (int l = 0; l < config.n_layers; ++l) {
    const size_t L = static_cast<size_t>(l);
    layers_.emplace_back(
        l, geometry.layers[L], options.exact, options.exact ? KvPair{} : options.pairs[L],
        options.settings,
        options.exact || options.fp8_scales.empty() ? KvHeadScales{} : options.fp8_scales[L]);
  }
}

size_t KvCache::bytes_held() const {
  size_t bytes = 0;
  for (const LayerKvCache& l : layers_) bytes += l.bytes_held();
  return bytes;
}

void KvCache::clear() {
  for (LayerKvCache& l : layers_) l.clear();
}

}  // namespace kvplan
