// Causal grouped-query attention of a chunk's queries over one layer's KV cache (internal): key and
// value tiles read from the cache's pages, folded into a running softmax (attention.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/kv_cache.h"

namespace kvplan {

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t window = 0;          // sliding window in tokens; 0 = full attention
  float logit_softcap = 0.0f;  // scores pass through soft_cap before the softmax; 0 = none
};

// q: [T, n_heads * head_dim] (row stride q_stride) of the chunk whose first token sits at position
// pos0; the cache holds positions [0, pos0 + T). Writes softmax(q K^T / sqrt(d)) V per head into
// out [T, n_heads * head_dim] (row stride out_stride).
void attend_chunk(const float* q, size_t q_stride, size_t n, size_t pos0, const LayerKvCache& cache,
                  const AttentionShape& shape, float* out, size_t out_stride);

}  // namespace kvplan
