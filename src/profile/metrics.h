// KVTuner's layer sensitivity metrics (Li et al., "KVTuner: Sensitivity-Aware Layer-wise Mixed
// Precision KV Cache Quantization", ICML 2025), computed from one layer's captured exact Q, K, V
// and the K̂, V̂ a quantized cache returns for them.
//
// Shapes: a layer's q is [T, n_heads * head_dim], k and v are [T, n_kv_heads * head_dim] (the
// capture layout of model/transformer.h); per-head matrices are [T, head_dim]; attention
// probabilities of one query head are [T, T] (row t: query t, column j: key j).
//
// Definitions (h: query head, g(h) = h / (n_heads / n_kv_heads) its KV head, t: token,
// P_h = causal softmax(q_h k_g^T / sqrt(head_dim)) restricted to the layer's sliding window,
// O_h = P_h v_g; hats use K̂ / V̂):
//   e_k = mean over (t, kv head g) with ||k_g[t]|| > 0 of ||k̂_g[t] - k_g[t]||_2 / ||k_g[t]||_2
//   e_v = the same for values
//   e_a = mean over (t, query head h) of sum_j |P̂_h[t, j] - P_h[t, j]|   (L1 distance of the
//         attention distributions: the absolute attention-score error summed over the keys one
//         query sees, so it does not shrink with context length; in [0, 2])
//   e_o = mean over (t, h) with ||O_h[t]|| > 0 of ||Ô_h[t] - O_h[t]||_2 / ||O_h[t]||_2
//   dKL = mean over positions t of KL(p_t || q_t) in nats, p_t the exact model's next-token
//         distribution at t and q_t the model's with only this layer's KV quantized.
// Every sum is accumulated in double in a fixed order (tokens, then heads, then prompts), so the
// numbers do not depend on the thread count.
//
//   kvplan::LayerErrors e = kvplan::layer_errors(q, k, v, k_hat, v_hat, shape);
//   e.e_k.mean();
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_weights.h"
#include "model/next_token_kl.h"

namespace kvplan {

// A metric's running sum and the number of terms; sums of sums stay exact in order.
struct MetricSum {
  double sum = 0;
  int64_t count = 0;
  void add(const MetricSum& other) {
    sum += other.sum;
    count += other.count;
  }
  [[nodiscard]] double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
};

struct AttentionLayerShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t window = 0;          // sliding window in tokens; 0 = full attention
  float logit_softcap = 0.0f;  // Gemma 2's cap on the scores (soft_cap); 0 = none
};

// [T, n * head_dim] -> n matrices [T, head_dim].
std::vector<RowMatrix> split_heads(const RowMatrix& x, int n, int head_dim);

// Sum over rows r with ||exact_r|| > 0 of ||approx_r - exact_r|| / ||exact_r||; count = those rows.
MetricSum relative_row_error(const RowMatrix& exact, const RowMatrix& approx);

// Sum over rows r of ||approx_r - exact_r||^2; count = rows.
MetricSum squared_row_error(const RowMatrix& exact, const RowMatrix& approx);

// Both of the above in one pass over the rows (the same bits as each alone).
struct RowErrors {
  MetricSum relative, squared;
};
RowErrors row_errors(const RowMatrix& exact, const RowMatrix& approx);

// Causal (and windowed) softmax(q k^T / sqrt(head_dim)) of one head: [T, T], zeros outside the
// mask.
RowMatrix attention_probabilities(const RowMatrix& q_head, const RowMatrix& k_head,
                                  const AttentionLayerShape& shape);

// Sum over rows of sum_j |approx - exact|; count = rows.
MetricSum attention_score_error(const RowMatrix& exact, const RowMatrix& approx);

struct LayerErrors {
  MetricSum e_k, e_v, e_a, e_o;
};

// All four attention-side metrics of one layer and one (K̂, V̂) — the composition the profiler
// runs, with its shared pieces (P per key format, V̂ per value format) computed once.
LayerErrors layer_errors(const RowMatrix& q, const RowMatrix& k, const RowMatrix& v,
                         const RowMatrix& k_hat, const RowMatrix& v_hat,
                         const AttentionLayerShape& shape);

// Sum over positions t of KL(p_t || softmax(logits[t])) in nats (next_token_kl); count = T.
MetricSum kl_sum(const ReferenceDistribution& ref, const RowMatrix& logits);

}  // namespace kvplan
