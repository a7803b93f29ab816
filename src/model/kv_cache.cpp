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

KvCacheOptions KvCacheOptions::per_head(const std::vector<std::vector<KvPair>>& heads,
                                        const QuantSettings& settings) {
  KvCacheOptions o;
  o.exact = false;
  o.settings = settings;
  bool any_differ = false;
  for (const std::vector<KvPair>& layer : heads) {
    if (layer.empty()) fail(ErrorCode::kInvalidArgument, "KV cache: a layer with no KV head pairs");
    o.pairs.push_back(layer.front());
    const bool differ =
        std::any_of(layer.begin(), layer.end(), [&](const KvPair& p) { return p != layer[0]; });
    o.head_pairs.push_back(differ ? layer : std::vector<KvPair>{});
    any_differ |= differ;
  }
  if (!any_differ) o.head_pairs.clear();
  return o;
}

KvCacheOptions KvCacheOptions::of_config(const std::vector<KvPair>& pairs,
                                         const KvGeometry& geometry,
                                         const QuantSettings& settings) {
  const size_t n_layers = geometry.layers.size();
  if (pairs.size() == n_layers) return per_layer(pairs, settings);
  if (pairs.size() != static_cast<size_t>(geometry.n_kv_heads_total())) {
    fail(ErrorCode::kInvalidArgument,
         "a KV configuration of {} pairs: expected one per layer ({}) or one per KV head ({})",
         pairs.size(), n_layers, geometry.n_kv_heads_total());
  }
  std::vector<std::vector<KvPair>> heads;
  auto next = pairs.begin();
  for (const KvLayerGeometry& l : geometry.layers) {
    heads.emplace_back(next, next + l.n_kv_heads);
    next += l.n_kv_heads;
  }
  return per_head(heads, settings);
}

std::vector<KvPair> KvCacheOptions::config(const KvGeometry& geometry) const {
  if (head_pairs.empty()) return pairs;
  std::vector<KvPair> out;
  for (int l = 0; l < geometry.n_layers(); ++l) {
    const std::vector<KvPair> heads =
        layer_head_pairs(l, geometry.layers[static_cast<size_t>(l)].n_kv_heads);
    out.insert(out.end(), heads.begin(), heads.end());
  }
  return out;
}

std::vector<KvPair> KvCacheOptions::layer_head_pairs(int l, int n_kv_heads) const {
  const size_t L = static_cast<size_t>(l);
  if (L < head_pairs.size() && !head_pairs[L].empty()) return head_pairs[L];
  return std::vector<KvPair>(static_cast<size_t>(n_kv_heads), pairs.at(L));
}

std::string KvCacheOptions::describe() const {
  if (exact) return "exact";
  if (pairs.empty()) return "none";
  const bool uniform =
      std::all_of(pairs.begin(), pairs.end(), [&](const KvPair& p) { return p == pairs[0]; });
  if (!head_pairs.empty()) return fmt::format("mixed per KV head ({} layers)", pairs.size());
  return uniform ? pairs[0].name() : fmt::format("mixed ({} layers)", pairs.size());
}

LayerKvCache::LayerKvCache(int layer, const KvLayerGeometry& geometry, bool exact, KvPair pair,
                           const QuantSettings& settings, KvHeadScales fp8_scales)
    : layer_(layer),
      exact_(exact),
      n_kv_heads_(geometry.n_kv_heads),
      head_dim_(geometry.head_dim),
      window_(geometry.sliding_window) {
  runs_.push_back({0,
                   checked_pages(layer, geometry, exact, pair, settings, std::move(fp8_scales)),
                   !exact && layer_runs_kivi(pair, settings),
                   0,
                   {},
                   {}});
}

LayerKvCache::LayerKvCache(int layer, const KvLayerGeometry& geometry,
                           const std::vector<KvPair>& head_pairs, const QuantSettings& settings,
                           KvHeadScales fp8_scales)
    : layer_(layer),
      exact_(false),
      n_kv_heads_(geometry.n_kv_heads),
      head_dim_(geometry.head_dim),
      window_(geometry.sliding_window) {
  if (head_pairs.size() != static_cast<size_t>(geometry.n_kv_heads)) {
    fail(ErrorCode::kInvalidArgument, "layer {}: {} KV head pairs given, the layer has {} KV heads",
         layer, head_pairs.size(), geometry.n_kv_heads);
  }
  for (const KvHeadRun& run : kv_head_runs(head_pairs)) {
    runs_.push_back(
        {run.first_head,
         checked_pages(layer, head_run_geometry(geometry, run), false, run.pair, settings,
                       head_run_scales(layer, fp8_scales, run, geometry.n_kv_heads)),
         layer_runs_kivi(run.pair, settings),
         0,
         {},
         {}});
  }
}

const LayerKvCache::HeadRun& LayerKvCache::run_of(int head) const {
  for (size_t r = runs_.size(); r-- > 0;) {
    if (head >= runs_[r].first_head) return runs_[r];
  }
  fail(ErrorCode::kInternal, "layer {}: no KV head {}", layer_, head);
}

const KvPageLayout& LayerKvCache::head_run_layout(int run) const {
  if (run < 0 || run >= n_head_runs()) {
    fail(ErrorCode::kOutOfRange, "layer {}: head run {}: expected 0..{}", layer_, run,
         n_head_runs() - 1);
  }
  return runs_[static_cast<size_t>(run)].pages;
}

size_t LayerKvCache::read_scratch_floats() const {
  size_t most = 0;
  for (const HeadRun& r : runs_) most = std::max(most, r.pages.unpack_scratch_floats());
  return most;
}

void LayerKvCache::clear() {
  n_tokens_ = staging_first_ = 0;
  first_held_page_ = 0;
  for (HeadRun& r : runs_) {
    r.n_committed = 0;
    r.k_pages.clear();
    r.v_pages.clear();
  }
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
  for (HeadRun& r : runs_) {
    size_t due = n_tokens_ - r.n_committed;
    if (r.kivi) {
      const size_t window = r.pages.settings().residual_length;
      due -= due % window;  // whole windows; the rest stays exact in staging
    }
    if (due > 0) pack_into_pages(r, due);
  }
  size_t committed = n_tokens_;
  for (const HeadRun& r : runs_) committed = std::min(committed, r.n_committed);
  const size_t done = committed - staging_first_;
  if (done == 0) return;
  const size_t width = row_floats();
  for (std::vector<float>* staging : {&k_staging_, &v_staging_}) {
    staging->erase(staging->begin(), staging->begin() + static_cast<std::ptrdiff_t>(done * width));
    // A long prefill's rows are gone once packed: give their memory back, so that what the cache
    // holds is its pages (and at most KIVI's residual window).
    if (staging->empty()) {
      std::vector<float>().swap(*staging);
    } else if (staging->capacity() > 2 * staging->size() + 64 * width) {
      staging->shrink_to_fit();
    }
  }
  staging_first_ = committed;
}

void LayerKvCache::ensure_pages(HeadRun& run, size_t tokens) const {
  const size_t needed = (tokens + block() - 1) / block();
  while (run.k_pages.size() < needed) {
    // Not zeroed: a page's bytes are written before they are read, and untouched memory stays
    // unresident until then.
    run.k_pages.push_back(
        std::make_unique_for_overwrite<uint8_t[]>(run.pages.page_bytes(KvSide::kKey)));
    run.v_pages.push_back(
        std::make_unique_for_overwrite<uint8_t[]>(run.pages.page_bytes(KvSide::kValue)));
  }
}

// Packs the run's next `n` staged tokens into their pages, page by page: windows and pages both
// start at multiples of group_size, so per-channel keys get whole groups.
void LayerKvCache::pack_into_pages(HeadRun& run, size_t n) {
  const size_t first = run.n_committed;
  ensure_pages(run, first + n);
  const size_t width = row_floats();
  const size_t head0 = static_cast<size_t>(run.first_head) * static_cast<size_t>(head_dim());
  for (size_t t = first; t < first + n;) {
    const size_t p = t / block();
    const size_t end = std::min(first + n, (p + 1) * block());
    const size_t row = t - staging_first_;
    run.pages.pack_tokens(KvSide::kKey, run.k_pages[p].get(), t - p * block(), end - t,
                          k_staging_.data() + row * width + head0, width);
    run.pages.pack_tokens(KvSide::kValue, run.v_pages[p].get(), t - p * block(), end - t,
                          v_staging_.data() + row * width + head0, width);
    t = end;
  }
  run.n_committed += n;
}

void LayerKvCache::free_pages_before(size_t token) {
  // Only pages every run has committed wholly behind `token` go; staging is never behind a window.
  const size_t last = std::min(token, n_committed()) / block();
  for (; first_held_page_ < last; ++first_held_page_) {
    for (HeadRun& r : runs_) {
      r.k_pages[first_held_page_].reset();
      r.v_pages[first_held_page_].reset();
    }
  }
}

void LayerKvCache::read(KvSide side, int head, size_t first, size_t n, float* out,
                        std::span<float> scratch, bool rotated_domain) const {
  if (first < first_held_token() || first + n > n_tokens_) {
    fail(ErrorCode::kInternal, "layer {}: read of tokens [{}, {}) outside the held [{}, {})",
         layer_, first, first + n, first_held_token(), n_tokens_);
  }
  const HeadRun& run = run_of(head);
  const auto& pages = side == KvSide::kKey ? run.k_pages : run.v_pages;
  const size_t dim = static_cast<size_t>(head_dim());
  size_t t = first;
  for (; t < first + n && t < run.n_committed;) {
    const size_t p = t / block();
    const size_t end = std::min({first + n, run.n_committed, (p + 1) * block()});
    run.pages.unpack_head(side, pages[p].get(), head - run.first_head, t - p * block(), end - t,
                          out + (t - first) * dim, scratch, rotated_domain);
    t = end;
  }
  const std::vector<float>& staging = side == KvSide::kKey ? k_staging_ : v_staging_;
  const size_t width = row_floats();
  const int span = rotated_domain ? run.pages.rotation_span(side) : 0;
  for (; t < first + n; ++t) {
    float* row = out + (t - first) * dim;
    std::memcpy(row,
                staging.data() + (t - staging_first_) * width + static_cast<size_t>(head) * dim,
                dim * sizeof(float));
    if (span > 0) hadamard_transform_spans(row, head_dim(), span);
  }
}

size_t LayerKvCache::bytes_held() const {
  size_t bytes = (k_staging_.capacity() + v_staging_.capacity()) * sizeof(float);
  for (const HeadRun& r : runs_) {
    const size_t held_pages = r.k_pages.size() - first_held_page_;
    bytes += held_pages * (r.pages.page_bytes(KvSide::kKey) + r.pages.page_bytes(KvSide::kValue));
  }
  return bytes;
}

const uint8_t* LayerKvCache::page(int run, KvSide side, size_t p) const {
  const HeadRun& r = runs_.at(static_cast<size_t>(run));
  const auto& pages = side == KvSide::kKey ? r.k_pages : r.v_pages;
  if (p >= pages.size() || !pages[p]) {
    fail(ErrorCode::kInternal, "layer {}: page {} is not held", layer_, p);
  }
  return pages[p].get();
}

uint8_t* LayerKvCache::page(int run, KvSide side, size_t p) {
  return const_cast<uint8_t*>(std::as_const(*this).page(run, side, p));
}

void LayerKvCache::adopt_committed(size_t n) {
  if (n_tokens_ != 0) {
    fail(ErrorCode::kInternal, "layer {}: a prefix is adopted by an empty cache, this one holds {}",
         layer_, n_tokens_);
  }
  for (HeadRun& run : runs_) {
    if (n % block() != 0 || (run.kivi && n % run.pages.settings().residual_length != 0)) {
      fail(ErrorCode::kInvalidArgument,
           "layer {}: an adopted prefix of {} tokens is not whole pages of {}{}", layer_, n,
           block(),
           run.kivi ? fmt::format(" and KIVI windows of {}", run.pages.settings().residual_length)
                    : "");
    }
  }
  for (HeadRun& run : runs_) {
    ensure_pages(run, n);
    run.n_committed = n;
  }
  n_tokens_ = staging_first_ = n;
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
  if (!options.exact && !options.head_pairs.empty() &&
      options.head_pairs.size() != static_cast<size_t>(config.n_layers)) {
    fail(ErrorCode::kInvalidArgument,
         "KV cache: KV head pairs for {} layers, the model has {} layers",
         options.head_pairs.size(), config.n_layers);
  }
  const KvGeometry geometry = kv_geometry(config);
  layers_.reserve(static_cast<size_t>(config.n_layers));
  for (int l = 0; l < config.n_layers; ++l) {
    const size_t L = static_cast<size_t>(l);
    const KvHeadScales scales =
        options.exact || options.fp8_scales.empty() ? KvHeadScales{} : options.fp8_scales[L];
    if (!options.exact && L < options.head_pairs.size() && !options.head_pairs[L].empty()) {
      layers_.emplace_back(l, geometry.layers[L], options.head_pairs[L], options.settings, scales);
    } else {
      layers_.emplace_back(l, geometry.layers[L], options.exact,
                           options.exact ? KvPair{} : options.pairs[L], options.settings, scales);
    }
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
