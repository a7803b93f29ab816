// The f32 CPU forward pass of a Llama-family model (Eigen GEMMs over whole chunks, OpenMP over
// attention heads) with the per-layer KV hook of kv_cache.h: every layer's K (after RoPE) and V go
// through that layer's KV format before attention reads them.
//
// forward() runs a chunk of tokens at the positions following what the cache already holds
// (batched prefill for a chunk, incremental decode for one token) and returns its logits. A
// ForwardCapture records, per layer, the residual-stream input, Q and K after RoPE and V (exact,
// before quantization), plus the logits — what the profiler needs — and forward_from_layer()
// re-runs the model from a captured residual input of one layer to the logits.
//
//   kvplan::Transformer model(weights);
//   kvplan::KvCache cache(weights.config, kvplan::KvCacheOptions::exact_kv());
//   kvplan::RowMatrix logits = model.forward(tokens, cache);   // [n_tokens, vocab]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/model_weights.h"

namespace kvplan {

struct ForwardCapture {
  bool residual_input = true;
  bool qkv = true;
  std::vector<RowMatrix> layer_input;  // [layer] -> [T, hidden], before the attention norm
  std::vector<RowMatrix> q;            // [layer] -> [T, n_heads * head_dim], after RoPE
  std::vector<RowMatrix> k;            // [layer] -> [T, n_kv_heads * head_dim], after RoPE, exact
  std::vector<RowMatrix> v;            // [layer] -> [T, n_kv_heads * head_dim], exact
  RowMatrix logits;                    // [T, vocab] (or [1, vocab] with last_logits_only)
};

struct ForwardOptions {
  bool last_logits_only = false;  // compute logits for the chunk's last token only (generation)
  // Otherwise logits for rows [logits_from_row, T) only (the profiler scores the second half of a
  // prompt); 0 = every row. Must be < T.
  size_t logits_from_row = 0;
};

// Sets the threads used by Eigen's GEMMs and the OpenMP loops (0 = leave as is).
void set_compute_threads(int threads);
int compute_threads();

class Transformer {
 public:
  explicit Transformer(const ModelWeights& weights);

  [[nodiscard]] const ModelConfig& config() const { return weights_.config; }
  [[nodiscard]] const ModelWeights& weights() const { return weights_; }

  // Throws Error(kInvalidArgument) for a token id outside the vocabulary or an empty chunk.
  RowMatrix forward(std::span<const int32_t> tokens, KvCache& cache,
                    ForwardCapture* capture = nullptr, const ForwardOptions& options = {}) const;

  // Runs layers first_layer .. n_layers-1 on `layer_input` ([T, hidden], the residual stream
  // entering first_layer) at the positions following cache.layer(first_layer)'s tokens.
  RowMatrix forward_from_layer(int first_layer, const RowMatrix& layer_input, KvCache& cache,
                               ForwardCapture* capture = nullptr,
                               const ForwardOptions& options = {}) const;

  // One sequence of a batch: its residual stream entering the first layer ([T, hidden]), its
  // cache, and the first of its rows whose logits are wanted.
  struct BatchSequence {
    const RowMatrix* layer_input = nullptr;
    KvCache* cache = nullptr;
    size_t logits_from_row = 0;
    ForwardCapture* capture = nullptr;  // this sequence's layers and logits, or none
  };
  // forward_from_layer for independent sequences at once: the matrix products take every
  // sequence's rows together (one product instead of one per sequence; each row's result is the
  // same bits as alone whenever a sequence has 4 rows or more), attention runs per sequence over
  // its own cache. Returns each sequence's logits rows [logits_from_row, T), one after another.
  RowMatrix forward_batch_from_layer(int first_layer, std::span<const BatchSequence> batch) const;
  // The residual stream entering layer 0 for `tokens` ([T, hidden]: embeddings, scaled as the
  // family does). Throws Error(kInvalidArgument) for an id outside the vocabulary or no tokens.
  [[nodiscard]] RowMatrix embed(std::span<const int32_t> tokens) const;

  // FLOPs of one chunk of `n` tokens starting at position `pos0` (GEMMs and attention), for
  // reporting GFLOP/s.
  [[nodiscard]] double chunk_flops(size_t pos0, size_t n, bool all_logits = true) const;

 private:
  const ModelWeights& weights_;
};

}  // namespace kvplan
