// The harness's KV cache: per layer, the K (after RoPE) and V rows attention reads, written once
// per token through the layer's KvPair — real pack_row/unpack_row (or pack_channels for KIVI keys)
// from src/formats — so attention sees exactly what a quantized cache would return.
//
// Layout per layer: [n_kv_heads, capacity, head_dim] f32 (one head's tokens contiguous, so a head
// is a plain [n_tokens, head_dim] matrix for the attention GEMMs). Values are stored dequantized;
// each token is quantized once, when it is committed:
//   per-token: every token, K and V rows of head_dim per KV head, groups of group_size (clamped);
//   kivi (the plan's mode, or a per-channel key format such as int4_kivi on this layer):
//              when residual_length uncommitted tokens exist, their keys are packed per channel in
//              groups of group_size tokens and their values per token; the newest
//              n % residual_length tokens stay exact (f32), as KIVI keeps its residual window in
//              full precision.
//
//   kvplan::KvCache cache(config, kvplan::KvCacheOptions::uniform(KvPair::parse("K8V4"), n, {}));
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "formats/fp8_scales.h"
#include "formats/kv_pair.h"
#include "formats/quant_settings.h"
#include "model/model_config.h"

namespace kvplan {

struct KvCacheOptions {
  bool exact = true;          // keep K/V as computed (the reference "exact KV")
  std::vector<KvPair> pairs;  // one per layer when !exact
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
  // "exact", or the pair name of a uniform assignment, or "mixed (N layers)".
  [[nodiscard]] std::string describe() const;
};

class LayerKvCache {
 public:
  LayerKvCache(int layer, int n_kv_heads, int head_dim, bool exact, KvPair pair,
               const QuantSettings& settings, KvHeadScales fp8_scales = {});

  // Appends `n` tokens: k and v point at row 0 of [n, n_kv_heads * head_dim] with `row_stride`
  // floats between rows. Not yet quantized: call commit().
  void append(const float* k, const float* v, size_t n, size_t row_stride);
  // Quantizes the appended tokens that the mode says are due (all of them in per-token mode).
  void commit();
  void clear() { n_tokens_ = n_committed_ = 0; }

  [[nodiscard]] size_t n_tokens() const { return n_tokens_; }
  [[nodiscard]] size_t n_quantized() const { return exact_ ? 0 : n_committed_; }
  [[nodiscard]] int n_kv_heads() const { return n_kv_heads_; }
  [[nodiscard]] int head_dim() const { return head_dim_; }
  // [n_tokens, head_dim] of KV head `h`, rows head_dim apart.
  [[nodiscard]] const float* keys(int h) const { return k_.data() + head_offset(h); }
  [[nodiscard]] const float* values(int h) const { return v_.data() + head_offset(h); }

 private:
  [[nodiscard]] size_t head_offset(int h) const {
    return static_cast<size_t>(h) * capacity_ * static_cast<size_t>(head_dim_);
  }
  void reserve(size_t tokens);
  void quantize_per_token(size_t begin, size_t end);
  void quantize_kivi_window(size_t begin, size_t end);

  int layer_;
  int n_kv_heads_;
  int head_dim_;
  bool exact_;
  KvPair pair_;
  QuantSettings settings_;
  KvHeadScales fp8_scales_;
  bool kivi_ = false;  // this layer runs KIVI (layer_runs_kivi)
  size_t capacity_ = 0;
  size_t n_tokens_ = 0;
  size_t n_committed_ = 0;
  std::vector<float> k_, v_;
  std::vector<uint8_t> scratch_;
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
  void clear();

 private:
  KvCacheOptions options_;
  std::vector<LayerKvCache> layers_;
};

}  // namespace kvplan
