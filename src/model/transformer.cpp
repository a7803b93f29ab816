#include "model/transformer.h"

#include <cmath>

#include <Eigen/Core>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "model/attention.h"
#include "model/logit_softcap.h"
#include "model/rope.h"
#include "model/weight_matrix.h"

namespace kvplan {
namespace {

// Row-wise loops (norms, RoPE, activations) split their rows over threads above this many
// elements; each row's arithmetic is the same either way.
constexpr Eigen::Index kParallelElements = 1 << 15;

// y = x / sqrt(mean(x^2) + eps) * w, row by row; the sum of squares in double like ggml's.
void rms_norm(const RowMatrix& x, const Vector& w, double eps, RowMatrix& y) {
  y.resize(x.rows(), x.cols());
#pragma omp parallel for schedule(static) if (x.size() > kParallelElements)
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    double sum = 0.0;
    const float* row = x.row(t).data();
    for (Eigen::Index i = 0; i < x.cols(); ++i) sum += static_cast<double>(row[i]) * row[i];
    const float scale =
        static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(x.cols()) + eps));
    y.row(t) = (x.row(t) * scale).cwiseProduct(w);
  }
}

// RMS norm of each head_dim-sized head of one row, in place (Gemma's Q/K norms).
void rms_norm_heads(float* row, int n_heads, int head_dim, const Vector& w, double eps) {
  for (int h = 0; h < n_heads; ++h) {
    float* x = row + static_cast<size_t>(h) * static_cast<size_t>(head_dim);
    double sum = 0.0;
    for (int i = 0; i < head_dim; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / head_dim + eps));
    for (int i = 0; i < head_dim; ++i) x[i] = x[i] * scale * w[i];
  }
}

// GELU with the tanh approximation (gelu_pytorch_tanh, ggml_gelu).
float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
}

// Rows of a batch whose logits are wanted: sequence s's [logits_from_row, T), one after another.
Eigen::Index wanted_rows(std::span<const Transformer::BatchSequence> batch,
                         const std::vector<Eigen::Index>& offset) {
  Eigen::Index wanted = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    wanted += offset[s + 1] - offset[s] - static_cast<Eigen::Index>(batch[s].logits_from_row);
  }
  return wanted;
}

// Replaces m ([all rows of the batch, *]) by its wanted rows.
void keep_wanted_rows(std::span<const Transformer::BatchSequence> batch,
                      const std::vector<Eigen::Index>& offset, RowMatrix& m) {
  RowMatrix kept(wanted_rows(batch, offset), m.cols());
  Eigen::Index at = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const auto from = static_cast<Eigen::Index>(batch[s].logits_from_row);
    const Eigen::Index n = offset[s + 1] - offset[s] - from;
    kept.middleRows(at, n) = m.middleRows(offset[s] + from, n);
    at += n;
  }
  m = std::move(kept);
}

}  // namespace

void set_compute_threads(int threads) {
  if (threads <= 0) return;
  Eigen::setNbThreads(threads);
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
}

int compute_threads() {
  return Eigen::nbThreads();
}

Transformer::Transformer(const ModelWeights& weights) : weights_(weights) {}

RowMatrix Transformer::forward(std::span<const int32_t> tokens, KvCache& cache,
                               ForwardCapture* capture, const ForwardOptions& options) const {
  return forward_from_layer(0, embed(tokens), cache, capture, options);
}

RowMatrix Transformer::embed(std::span<const int32_t> tokens) const {
  if (tokens.empty()) fail(ErrorCode::kInvalidArgument, "forward: empty chunk of tokens");
  const ModelConfig& c = weights_.config;
  RowMatrix x(static_cast<Eigen::Index>(tokens.size()), c.hidden_size);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= weights_.token_embd.rows()) {
      fail(ErrorCode::kInvalidArgument,
           "token id {} at chunk position {} is outside the "
           "vocabulary [0, {})",
           id, t, weights_.token_embd.rows());
    }
    weights_.token_embd.dequantize_rows(id, 1, x.row(static_cast<Eigen::Index>(t)).data());
  }
  if (c.embedding_scale != 1.0) x *= static_cast<float>(c.embedding_scale);
  return x;
}

RowMatrix Transformer::forward_from_layer(int first_layer, const RowMatrix& layer_input,
                                          KvCache& cache, ForwardCapture* capture,
                                          const ForwardOptions& options) const {
  const size_t from = options.last_logits_only && layer_input.rows() > 0
                          ? static_cast<size_t>(layer_input.rows() - 1)
                          : options.logits_from_row;
  const BatchSequence one{&layer_input, &cache, from, capture};
  return forward_batch_from_layer(first_layer, std::span(&one, 1));
}

RowMatrix Transformer::forward_batch_from_layer(int first_layer,
                                                std::span<const BatchSequence> batch) const {
  const ModelConfig& c = weights_.config;
  if (first_layer < 0 || first_layer >= c.n_layers) {
    fail(ErrorCode::kInvalidArgument, "forward_from_layer: layer {} outside [0, {})", first_layer,
         c.n_layers);
  }
  if (batch.empty()) fail(ErrorCode::kInvalidArgument, "forward: empty batch");
  // Sequence s holds rows [offset[s], offset[s + 1]) of the stacked residual stream.
  const size_t S = batch.size();
  std::vector<Eigen::Index> offset(S + 1, 0);
  std::vector<size_t> pos0(S);
  for (size_t s = 0; s < S; ++s) {
    const BatchSequence& seq = batch[s];
    const RowMatrix& in = *seq.layer_input;
    if (in.cols() != c.hidden_size || in.rows() == 0) {
      fail(ErrorCode::kInvalidArgument, "forward_from_layer: input is [{}, {}], expected [T, {}]",
           in.rows(), in.cols(), c.hidden_size);
    }
    if (seq.cache->n_layers() != c.n_layers) {
      fail(ErrorCode::kInvalidArgument, "KV cache has {} layers, the model {}",
           seq.cache->n_layers(), c.n_layers);
    }
    if (seq.logits_from_row >= static_cast<size_t>(in.rows())) {
      fail(ErrorCode::kInvalidArgument, "forward: logits_from_row {} is not below the {} rows",
           seq.logits_from_row, in.rows());
    }
    offset[s + 1] = offset[s] + in.rows();
    pos0[s] = seq.cache->layer(first_layer).n_tokens();
  }
  const Eigen::Index N = offset[S];
  const Eigen::Index hd = c.head_dim;
  // Each sequence's positions, for the global layers and for sliding-window layers with their own
  // RoPE base (Gemma 3's local layers, whose RoPE is never scaled: llama.cpp's
  // rope_freq_scale_train_swa = 1).
  std::vector<RopeTable> rope, rope_sliding;
  ModelConfig sliding_config = c;
  sliding_config.rope_theta = c.rope_theta_sliding;
  sliding_config.rope_scaling = RopeScaling::kNone;
  for (size_t s = 0; s < S; ++s) {
    const auto T = static_cast<size_t>(offset[s + 1] - offset[s]);
    rope.emplace_back(c, weights_.rope_freq_factors);
    rope.back().prepare(pos0[s], T);
    if (c.rope_theta_sliding > 0) {
      rope_sliding.emplace_back(sliding_config, weights_.rope_freq_factors);
      rope_sliding.back().prepare(pos0[s], T);
    }
  }
  // Queries carry any scale other than attention's 1/sqrt(head_dim).
  const float query_scale =
      c.attention_scale > 0 ? static_cast<float>(c.attention_scale * std::sqrt(c.head_dim)) : 1.0f;
  for (const BatchSequence& seq : batch) {
    ForwardCapture* capture = seq.capture;
    if (capture == nullptr) continue;
    if (capture->residual_input) capture->layer_input.resize(static_cast<size_t>(c.n_layers));
    if (capture->qkv) {
      capture->q.resize(static_cast<size_t>(c.n_layers));
      capture->k.resize(static_cast<size_t>(c.n_layers));
      capture->v.resize(static_cast<size_t>(c.n_layers));
    }
  }
  // Sequence s's rows of a batch matrix.
  const auto rows_of = [&](const RowMatrix& m, size_t s) {
    return m.middleRows(offset[s], offset[s + 1] - offset[s]);
  };

  RowMatrix x(N, c.hidden_size);
  for (size_t s = 0; s < S; ++s) {
    x.middleRows(offset[s], offset[s + 1] - offset[s]) = *batch[s].layer_input;
  }
  RowMatrix h, qkv, attn(N, static_cast<Eigen::Index>(c.n_heads) * hd), proj, gate_up, act;
  for (int l = first_layer; l < c.n_layers; ++l) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    for (size_t s = 0; s < S; ++s) {
      const LayerKvCache& layer_cache = batch[s].cache->layer(l);
      if (layer_cache.n_tokens() != pos0[s]) {
        fail(ErrorCode::kInternal, "KV cache layer {} holds {} tokens, layer {} holds {}", l,
             layer_cache.n_tokens(), first_layer, pos0[s]);
      }
    }
    const int n_kv = c.n_kv_heads[static_cast<size_t>(l)];
    const Eigen::Index q_cols = static_cast<Eigen::Index>(c.n_heads) * hd;
    const Eigen::Index kv_cols = static_cast<Eigen::Index>(n_kv) * hd;
    for (size_t s = 0; s < S; ++s) {
      ForwardCapture* capture = batch[s].capture;
      if (capture != nullptr && capture->residual_input) {
        capture->layer_input[static_cast<size_t>(l)] = rows_of(x, s);
      }
    }

    rms_norm(x, L.attn_norm, c.rms_norm_eps, h);
    matmul_transposed(h, L.wqkv, qkv);  // [N, q + 2 kv]
    if (L.bqkv.size()) qkv.rowwise() += L.bqkv;
    const bool sliding = c.sliding_window[static_cast<size_t>(l)] > 0;
    for (size_t s = 0; s < S; ++s) {
      const RopeTable& layer_rope = sliding && !rope_sliding.empty() ? rope_sliding[s] : rope[s];
      const Eigen::Index T = offset[s + 1] - offset[s];
#pragma omp parallel for schedule(static) if (T * qkv.cols() > kParallelElements)
      for (Eigen::Index t = 0; t < T; ++t) {
        float* row = qkv.row(offset[s] + t).data();
        if (c.qk_norm) {
          rms_norm_heads(row, c.n_heads, c.head_dim, L.q_norm, c.rms_norm_eps);
          rms_norm_heads(row + q_cols, n_kv, c.head_dim, L.k_norm, c.rms_norm_eps);
        }
        layer_rope.apply(row, static_cast<size_t>(t), c.n_heads);
        layer_rope.apply(row + q_cols, static_cast<size_t>(t), n_kv);
        if (query_scale != 1.0f) {
          for (Eigen::Index i = 0; i < q_cols; ++i) row[i] *= query_scale;
        }
      }
    }
    for (size_t s = 0; s < S; ++s) {
      ForwardCapture* capture = batch[s].capture;
      if (capture == nullptr || !capture->qkv) continue;
      const auto own = rows_of(qkv, s);
      capture->q[static_cast<size_t>(l)] = own.leftCols(q_cols);
      capture->k[static_cast<size_t>(l)] = own.middleCols(q_cols, kv_cols);
      capture->v[static_cast<size_t>(l)] = own.middleCols(q_cols + kv_cols, kv_cols);
    }

    const size_t stride = static_cast<size_t>(qkv.cols());
    const AttentionShape shape{c.n_heads, n_kv, c.head_dim,
                               c.sliding_window[static_cast<size_t>(l)],
                               static_cast<float>(c.attn_logit_softcap)};
    for (size_t s = 0; s < S; ++s) {
      LayerKvCache& layer_cache = batch[s].cache->layer(l);
      const auto T = static_cast<size_t>(offset[s + 1] - offset[s]);
      const float* rows = qkv.data() + static_cast<size_t>(offset[s]) * stride;
      layer_cache.append(rows + q_cols, rows + q_cols + kv_cols, T, stride);
      const bool quantize_first = batch[s].cache->options().chunk_attends_quantized;
      if (quantize_first) layer_cache.commit();
      attend_chunk(rows, stride, T, pos0[s], layer_cache, shape,
                   attn.data() + static_cast<size_t>(offset[s]) * static_cast<size_t>(attn.cols()),
                   static_cast<size_t>(attn.cols()));
      if (!quantize_first) layer_cache.commit();
    }
    if (l == c.n_layers - 1) {
      // Past the last attention only the rows whose logits are wanted go on (their K and V are
      // in the caches by then), when they are enough rows for each to keep its bits.
      const Eigen::Index wanted = wanted_rows(batch, offset);
      if (wanted < N && wanted >= kMinRowsForSameBits) {
        keep_wanted_rows(batch, offset, x);
        keep_wanted_rows(batch, offset, attn);
      }
    }

    matmul_transposed(attn, L.wo, proj);
    if (c.post_norms) {
      rms_norm(proj, L.post_attn_norm, c.rms_norm_eps, h);
      x += h;
    } else {
      x += proj;
    }

    rms_norm(x, L.ffn_norm, c.rms_norm_eps, h);
    matmul_transposed(h, L.w_gate_up, gate_up);  // [N, 2 ffn]: act(gate) * up
    const Eigen::Index ffn = L.w_down.cols();
    const Eigen::Index rows = gate_up.rows();
    act.resize(rows, ffn);
    const bool gelu = c.ffn_activation == FfnActivation::kGeluTanh;
#pragma omp parallel for schedule(static) if (rows * ffn > kParallelElements)
    for (Eigen::Index t = 0; t < rows; ++t) {
      const float* g = gate_up.row(t).data();
      const float* u = g + ffn;
      float* a = act.row(t).data();
      if (gelu) {
        for (Eigen::Index i = 0; i < ffn; ++i) a[i] = gelu_tanh(g[i]) * u[i];
      } else {
        for (Eigen::Index i = 0; i < ffn; ++i) a[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      }
    }
    matmul_transposed(act, L.w_down, proj);
    if (c.post_norms) {
      rms_norm(proj, L.post_ffn_norm, c.rms_norm_eps, h);
      x += h;
    } else {
      x += proj;
    }
  }

  if (x.rows() == N) keep_wanted_rows(batch, offset, x);
  RowMatrix normed, logits;
  rms_norm(x, weights_.output_norm, c.rms_norm_eps, normed);
  matmul_transposed(normed, weights_.lm_head(), logits);
  if (c.final_logit_softcap > 0) {
    const float cap = static_cast<float>(c.final_logit_softcap);
    logits = logits.unaryExpr([cap](float z) { return soft_cap(z, cap); });
  }
  Eigen::Index at = 0;
  for (const BatchSequence& seq : batch) {
    const Eigen::Index n = seq.layer_input->rows() - static_cast<Eigen::Index>(seq.logits_from_row);
    if (seq.capture != nullptr) seq.capture->logits = logits.middleRows(at, n);
    at += n;
  }
  return logits;
}

double Transformer::chunk_flops(size_t pos0, size_t n, bool all_logits) const {
  double flops = 0;
  const double T = static_cast<double>(n);
  for (const LayerWeights& L : weights_.layers) {
    flops +=
        2.0 * T *
        static_cast<double>(L.wqkv.size() + L.wo.size() + L.w_gate_up.size() + L.w_down.size());
    // QK^T and PV over the keys each query sees (causal: pos0 + t + 1).
    const double keys = T * static_cast<double>(pos0) + T * (T + 1) / 2;
    flops += 4.0 * keys * static_cast<double>(weights_.config.n_heads) * weights_.config.head_dim;
  }
  flops += 2.0 * (all_logits ? T : 1.0) * static_cast<double>(weights_.lm_head().size());
  return flops;
}

}  // namespace kvplan
