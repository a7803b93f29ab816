// The harness's KV cache: per layer, K (after RoPE) and V in pages of the layer's real packed bytes
// (formats/kv_page_layout.h: the pages the runtime stores and moves), so that memory is what the
// plan says and attention reads exactly what a quantized cache returns.
//
// A token is appended as f32 into a small staging area and packed into its page once, when it is
// committed:
//   per-token: every appended token, K and V rows of head_dim per KV head;
//   kivi (the plan's mode, or a per-channel key format such as int4_kivi on this layer): whole
//              windows of residual_length tokens, keys packed per channel in groups of
//              group_size tokens and values per token; the newest n % residual_length tokens
//              stay exact f32 in staging, as KIVI keeps its residual window in full precision.
// "Exact KV" is the f32/f32 pair: its pages hold the rows bit for bit. Attention reads tiles of a
// head's rows (read()), unpacked on the fly; no f32 copy of the cache exists. A sliding-window
// layer frees the pages behind its window as tokens arrive.
//
// Per-KV-head plans: a layer whose KV heads take different pairs holds each run of consecutive
// heads of one pair in pages of its own (that pair's layout over those heads), committed on its
// own (a KIVI run keeps its residual window while the other heads pack every token). Every format
// packs one head's row on its own, so a head reads back exactly what a layer of its pair gives.
//
//   kvplan::KvCache cache(config, kvplan::KvCacheOptions::uniform(KvPair::parse("K8V4"), n, {}));
//   cache.layer(0).read(KvSide::kKey, /*head=*/1, /*first=*/0, /*n=*/64, out, scratch);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/fp8_scales.h"
#include "formats/kv_page_layout.h"
#include "formats/kv_pair.h"
#include "formats/quant_settings.h"
#include "model/model_config.h"

namespace kvplan {

struct KvCacheOptions {
  bool exact = true;          // keep K/V as computed (the reference "exact KV")
  std::vector<KvPair> pairs;  // one per layer when !exact
  // [layer][KV head]: the pairs of a layer whose KV heads differ (per-KV-head plans); an empty
  // entry, or no entries at all, means every head takes pairs[layer]. pairs[layer] is then its
  // head 0's.
  std::vector<std::vector<KvPair>> head_pairs{};
  QuantSettings settings;
  // Per layer, the FP8 scales of each KV head (formats/fp8_scales.h); empty = 1 everywhere.
  std::vector<KvHeadScales> fp8_scales{};
  // Whether a prefill chunk's own attention reads its K/V after quantization. Default true: real
  // engines (llama.cpp, vLLM) write the chunk's K/V into the quantized cache and attention reads
  // them back. False models engines that attend over the chunk's exact K/V and quantize afterwards
  // (KIVI's prefill).
  bool chunk_attends_quantized = true;

  static KvCacheOptions exact_kv() { return {}; }
  static KvCacheOptions uniform(const KvPair& pair, int n_layers, const QuantSettings& settings);
  static KvCacheOptions per_layer(std::vector<KvPair> pairs, const QuantSettings& settings);
  // [layer][KV head] pairs; layers whose heads agree keep only pairs[layer].
  static KvCacheOptions per_head(const std::vector<std::vector<KvPair>>& heads,
                                 const QuantSettings& settings);
  // A KV configuration: one pair per layer, or one per KV head (layer-major,
  // geometry.n_kv_heads_total() of them: per-KV-head plans). Error(kInvalidArgument) for any other
  // count.
  static KvCacheOptions of_config(const std::vector<KvPair>& pairs, const KvGeometry& geometry,
                                  const QuantSettings& settings);
  // "exact", or the pair name of a uniform assignment, or "mixed (N layers)".
  [[nodiscard]] std::string describe() const;
  // The configuration back (of_config's input): one pair per layer, or one per KV head when a
  // layer's heads differ.
  [[nodiscard]] std::vector<KvPair> config(const KvGeometry& geometry) const;
  // Layer `l`'s pair per KV head (n_kv_heads of them).
  [[nodiscard]] std::vector<KvPair> layer_head_pairs(int l, int n_kv_heads) const;
};

class LayerKvCache {
 public:
  // `exact` ignores `pair` and holds f32/f32. Throws Error(kInvalidArgument) naming the layer, K
  // or V and the format when it cannot pack this layer's rows, or for a slot (opaque bytes).
  LayerKvCache(int layer, const KvLayerGeometry& geometry, bool exact, KvPair pair,
               const QuantSettings& settings, KvHeadScales fp8_scales = {});
  // One pair per KV head (geometry.n_kv_heads of them); runs of equal heads share pages.
  LayerKvCache(int layer, const KvLayerGeometry& geometry, const std::vector<KvPair>& head_pairs,
               const QuantSettings& settings, KvHeadScales fp8_scales = {});

  // Appends `n` tokens: k and v point at row 0 of [n, n_kv_heads * head_dim] with `row_stride`
  // floats between rows. Not yet quantized: call commit().
  void append(const float* k, const float* v, size_t n, size_t row_stride);
  // Packs the appended tokens that the mode says are due (all of them in per-token mode).
  void commit();
  void clear();

  [[nodiscard]] size_t n_tokens() const { return n_tokens_; }
  // Tokens packed in every head's pages.
  [[nodiscard]] size_t n_committed() const { return staging_first_; }
  [[nodiscard]] size_t n_quantized() const { return exact_ ? 0 : n_committed(); }
  [[nodiscard]] int n_kv_heads() const { return n_kv_heads_; }
  [[nodiscard]] int head_dim() const { return head_dim_; }
  // Whether the layer's KV heads take more than one pair (pages per run of heads).
  [[nodiscard]] bool per_head() const { return runs_.size() > 1; }
  // Runs of consecutive KV heads of one pair (formats/kv_page_layout.h KvHeadRun), each paged on
  // its own; a layer of one pair has one. Run `r`'s page layout (its pair over its heads).
  [[nodiscard]] int n_head_runs() const { return static_cast<int>(runs_.size()); }
  [[nodiscard]] const KvPageLayout& head_run_layout(int run) const;

  // Tokens [first, first + n) of KV head `head` as attention sees them, into out [n, head_dim]:
  // committed tokens unpacked from their pages, the rest from staging. `scratch` holds
  // read_scratch_floats() floats (reads from several threads need one each). `rotated_domain`:
  // a side with a rotation_span gives its rows rotated (each span of a row through
  // hadamard_transform), unpacked without rotating back and staging rows rotated forward.
  void read(KvSide side, int head, size_t first, size_t n, float* out, std::span<float> scratch,
            bool rotated_domain = false) const;
  // The Hadamard span of a KV head's rotated domain on a side (formats/pack.h rotation_span);
  // 0 = none.
  [[nodiscard]] int rotation_span(KvSide side, int head) const {
    return run_of(head).pages.rotation_span(side);
  }
  [[nodiscard]] size_t read_scratch_floats() const;

  // The first token still held: a sliding-window layer frees whole pages behind its window.
  [[nodiscard]] size_t first_held_token() const { return first_held_page_ * block(); }
  // Bytes the layer holds: its pages and its staging rows.
  [[nodiscard]] size_t bytes_held() const;

  // Pages of committed tokens: page p holds tokens [p * block_size, (p + 1) * block_size), one K
  // and one V page per head run (every run frees the same pages behind a sliding window).
  [[nodiscard]] size_t n_pages() const { return runs_.front().k_pages.size(); }
  [[nodiscard]] bool holds_page(size_t p) const {
    return p < n_pages() && runs_.front().k_pages[p] != nullptr;
  }
  [[nodiscard]] const uint8_t* page(int run, KvSide side, size_t p) const;
  [[nodiscard]] uint8_t* page(int run, KvSide side, size_t p);
  // An empty layer takes `n` committed tokens (whole pages, and whole KIVI windows where a run
  // runs KIVI) whose bytes the caller then writes into page(run, side, p): a prefix restored from
  // stored pages, attended as it is, never re-packed.
  void adopt_committed(size_t n);

 private:
  // Consecutive KV heads of one pair: their pages and how many tokens they hold packed.
  struct HeadRun {
    int first_head = 0;
    KvPageLayout pages;
    bool kivi = false;  // the run's pair runs KIVI (layer_runs_kivi)
    size_t n_committed = 0;
    std::vector<std::unique_ptr<uint8_t[]>> k_pages, v_pages;  // null once freed
  };

  [[nodiscard]] size_t block() const { return runs_.front().pages.block_size(); }
  [[nodiscard]] size_t row_floats() const {
    return static_cast<size_t>(n_kv_heads()) * static_cast<size_t>(head_dim());
  }
  [[nodiscard]] const HeadRun& run_of(int head) const;
  void ensure_pages(HeadRun& run, size_t tokens) const;
  void pack_into_pages(HeadRun& run, size_t n);
  void free_pages_before(size_t token);

  int layer_;
  bool exact_;
  int n_kv_heads_ = 0;
  int head_dim_ = 0;
  int64_t window_ = 0;  // sliding window in tokens; 0 = every token
  std::vector<HeadRun> runs_;
  size_t n_tokens_ = 0;
  size_t staging_first_ = 0;  // the least committed count over the runs: staging's first token
  size_t first_held_page_ = 0;
  // Tokens [staging_first_, n_tokens_) as appended: [token][n_kv_heads * head_dim] f32.
  std::vector<float> k_staging_, v_staging_;
};

class KvCache {
 public:
  // Throws Error(kInvalidArgument) naming the layer, K or V and the format when a format cannot
  // pack this model's rows (e.g. q4_0 on head_dim 8), or when pairs.size() != n_layers.
  KvCache(const ModelConfig& config, const KvCacheOptions& options);

  [[nodiscard]] LayerKvCache& layer(int l) { return layers_[static_cast<size_t>(l)]; }
  [[nodiscard]] const LayerKvCache& layer(int l) const { return layers_[static_cast<size_t>(l)]; }
  [[nodiscard]] int n_layers() const { return static_cast<int>(layers_.size()); }
  [[nodiscard]] const KvCacheOptions& options() const { return options_; }
  // Bytes every layer holds (pages and staging).
  [[nodiscard]] size_t bytes_held() const;
  void clear();

 private:
  KvCacheOptions options_;
  std::vector<LayerKvCache> layers_;
};

}  // namespace kvplan
