#include "model/transformer.h"

#include <cmath>
#include <optional>

#include <Eigen/Core>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "model/attention.h"
#include "model/logit_softcap.h"
#include "model/rope.h"

namespace kvplan {
namespace {

// y = x / sqrt(mean(x^2) + eps) * w, row by row; the sum of squares in double like ggml's.
void rms_norm(const RowMatrix& x, const Vector& w, double eps, RowMatrix& y) {
  y.resize(x.rows(), x.cols());
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

SerialEigenScope::SerialEigenScope() : saved_(Eigen::nbThreads()) {
  Eigen::setNbThreads(1);
}
SerialEigenScope::~SerialEigenScope() {
  Eigen::setNbThreads(saved_);
}

Transformer::Transformer(const ModelWeights& weights) : weights_(weights) {}

RowMatrix Transformer::forward(std::span<const int32_t> tokens, KvCache& cache,
                               ForwardCapture* capture, const ForwardOptions& options) const {
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
  return forward_from_layer(0, x, cache, capture, options);
}

RowMatrix Transformer::forward_from_layer(int first_layer, const RowMatrix& layer_input,
                                          KvCache& cache, ForwardCapture* capture,
                                          const ForwardOptions& options) const {
  const ModelConfig& c = weights_.config;
  if (first_layer < 0 || first_layer >= c.n_layers) {
    fail(ErrorCode::kInvalidArgument, "forward_from_layer: layer {} outside [0, {})", first_layer,
         c.n_layers);
  }
  if (layer_input.cols() != c.hidden_size || layer_input.rows() == 0) {
    fail(ErrorCode::kInvalidArgument, "forward_from_layer: input is [{}, {}], expected [T, {}]",
         layer_input.rows(), layer_input.cols(), c.hidden_size);
  }
  if (cache.n_layers() != c.n_layers) {
    fail(ErrorCode::kInvalidArgument, "KV cache has {} layers, the model {}", cache.n_layers(),
         c.n_layers);
  }
  const Eigen::Index T = layer_input.rows();
  const Eigen::Index hd = c.head_dim;
  const size_t pos0 = cache.layer(first_layer).n_tokens();
  RopeTable rope(c, weights_.rope_freq_factors);
  rope.prepare(pos0, static_cast<size_t>(T));
  // Sliding-window layers with their own RoPE base (Gemma 3's local layers).
  std::optional<RopeTable> rope_sliding;
  if (c.rope_theta_sliding > 0) {
    // Gemma 3 scales the global layers' RoPE only (llama.cpp: rope_freq_scale_train_swa = 1).
    ModelConfig sliding = c;
    sliding.rope_theta = c.rope_theta_sliding;
    sliding.rope_scaling = RopeScaling::kNone;
    rope_sliding.emplace(sliding, weights_.rope_freq_factors);
    rope_sliding->prepare(pos0, static_cast<size_t>(T));
  }
  // Queries carry any scale other than attention's 1/sqrt(head_dim).
  const float query_scale =
      c.attention_scale > 0 ? static_cast<float>(c.attention_scale * std::sqrt(c.head_dim)) : 1.0f;
  if (capture != nullptr) {
    if (capture->residual_input) capture->layer_input.resize(static_cast<size_t>(c.n_layers));
    if (capture->qkv) {
      capture->q.resize(static_cast<size_t>(c.n_layers));
      capture->k.resize(static_cast<size_t>(c.n_layers));
      capture->v.resize(static_cast<size_t>(c.n_layers));
    }
  }

  RowMatrix x = layer_input;
  RowMatrix h, qkv, attn(T, static_cast<Eigen::Index>(c.n_heads) * hd), proj, gate_up, act;
  for (int l = first_layer; l < c.n_layers; ++l) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    LayerKvCache& layer_cache = cache.layer(l);
    if (layer_cache.n_tokens() != pos0) {
      fail(ErrorCode::kInternal, "KV cache layer {} holds {} tokens, layer {} holds {}", l,
           layer_cache.n_tokens(), first_layer, pos0);
    }
    const int n_kv = c.n_kv_heads[static_cast<size_t>(l)];
    const Eigen::Index q_cols = static_cast<Eigen::Index>(c.n_heads) * hd;
    const Eigen::Index kv_cols = static_cast<Eigen::Index>(n_kv) * hd;
    if (capture != nullptr && capture->residual_input)
      capture->layer_input[static_cast<size_t>(l)] = x;

    rms_norm(x, L.attn_norm, c.rms_norm_eps, h);
    matmul_transposed(h, L.wqkv, qkv);  // [T, q + 2 kv]
    if (L.bqkv.size()) qkv.rowwise() += L.bqkv;
    const bool sliding = c.sliding_window[static_cast<size_t>(l)] > 0;
    const RopeTable& layer_rope = sliding && rope_sliding ? *rope_sliding : rope;
    for (Eigen::Index t = 0; t < T; ++t) {
      float* row = qkv.row(t).data();
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
    if (capture != nullptr && capture->qkv) {
      capture->q[static_cast<size_t>(l)] = qkv.leftCols(q_cols);
      capture->k[static_cast<size_t>(l)] = qkv.middleCols(q_cols, kv_cols);
      capture->v[static_cast<size_t>(l)] = qkv.middleCols(q_cols + kv_cols, kv_cols);
    }

    const size_t stride = static_cast<size_t>(qkv.cols());
    layer_cache.append(qkv.data() + q_cols, qkv.data() + q_cols + kv_cols, static_cast<size_t>(T),
                       stride);
    const bool quantize_first = cache.options().chunk_attends_quantized;
    if (quantize_first) layer_cache.commit();
    const AttentionShape shape{c.n_heads, n_kv, c.head_dim,
                               c.sliding_window[static_cast<size_t>(l)],
                               static_cast<float>(c.attn_logit_softcap)};
    attend_chunk(qkv.data(), stride, static_cast<size_t>(T), pos0, layer_cache, shape, attn.data(),
                 static_cast<size_t>(attn.cols()));
    if (!quantize_first) layer_cache.commit();

    matmul_transposed(attn, L.wo, proj);
    if (c.post_norms) {
      rms_norm(proj, L.post_attn_norm, c.rms_norm_eps, h);
      x += h;
    } else {
      x += proj;
    }

    rms_norm(x, L.ffn_norm, c.rms_norm_eps, h);
    matmul_transposed(h, L.w_gate_up, gate_up);  // [T, 2 ffn]: act(gate) * up
    const Eigen::Index ffn = L.w_down.cols();
    act.resize(T, ffn);
    const bool gelu = c.ffn_activation == FfnActivation::kGeluTanh;
#pragma omp parallel for schedule(static) if (T * ffn > (1 << 15))
    for (Eigen::Index t = 0; t < T; ++t) {
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

  RowMatrix normed;
  RowMatrix logits;
  if (options.last_logits_only) {
    const RowMatrix last = x.bottomRows(1);
    rms_norm(last, weights_.output_norm, c.rms_norm_eps, normed);
  } else if (options.logits_from_row > 0) {
    if (options.logits_from_row >= static_cast<size_t>(T)) {
      fail(ErrorCode::kInvalidArgument, "forward: logits_from_row {} is not below the {} rows",
           options.logits_from_row, T);
    }
    const RowMatrix tail = x.bottomRows(T - static_cast<Eigen::Index>(options.logits_from_row));
    rms_norm(tail, weights_.output_norm, c.rms_norm_eps, normed);
  } else {
    rms_norm(x, weights_.output_norm, c.rms_norm_eps, normed);
  }
  matmul_transposed(normed, weights_.lm_head(), logits);
  if (c.final_logit_softcap > 0) {
    const float cap = static_cast<float>(c.final_logit_softcap);
    logits = logits.unaryExpr([cap](float z) { return soft_cap(z, cap); });
  }
  if (capture != nullptr) capture->logits = logits;
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
