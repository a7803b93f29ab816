// A naive f64 forward pass (plain loops, no caching, no Eigen products) used as the independent
// reference for the harness's Transformer. Handles RMSNorm, both RoPE layouts (no scaling), GQA,
// q/k/v biases, SwiGLU and tied embeddings.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "model/model_weights.h"

namespace kvplan::test {

inline std::vector<std::vector<double>> reference_logits(const ModelWeights& w,
                                                         const std::vector<int32_t>& tokens) {
  const ModelConfig& c = w.config;
  const int D = c.hidden_size, hd = c.head_dim, nh = c.n_heads;
  const size_t T = tokens.size();
  using Vec = std::vector<double>;
  auto matvec = [](const WeightMatrix& w, Eigen::Index row0, Eigen::Index rows, const Vec& x) {
    RowMatrix m(rows, w.cols());
    w.dequantize_rows(row0, rows, m.data());
    Vec y(static_cast<size_t>(rows), 0.0);
    for (Eigen::Index r = 0; r < rows; ++r) {
      double s = 0;
      for (Eigen::Index k = 0; k < m.cols(); ++k)
        s += static_cast<double>(m(r, k)) * x[static_cast<size_t>(k)];
      y[static_cast<size_t>(r)] = s;
    }
    return y;
  };
  auto rmsnorm = [&](const Vec& x, const Vector& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + c.rms_norm_eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      y[i] = x[i] * inv * static_cast<double>(g[static_cast<Eigen::Index>(i)]);
    return y;
  };
  auto rope = [&](double* v, size_t pos) {
    for (int i = 0; i < hd / 2; ++i) {
      const double angle = static_cast<double>(pos) * std::pow(c.rope_theta, -2.0 * i / hd);
      const int a = c.rope_layout == RopeLayout::kAdjacentPairs ? 2 * i : i;
      const int b = c.rope_layout == RopeLayout::kAdjacentPairs ? 2 * i + 1 : i + hd / 2;
      const double x0 = v[a], x1 = v[b];
      v[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
      v[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
    }
  };
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) {
    RowMatrix row(1, D);
    w.token_embd.dequantize_rows(tokens[t], 1, row.data());
    x[t].assign(row.data(), row.data() + D);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const int nkv = c.n_kv_heads[static_cast<size_t>(l)];
    const Eigen::Index qr = nh * hd, kr = nkv * hd;
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      const Vec h = rmsnorm(x[t], L.attn_norm);
      q[t] = matvec(L.wqkv, 0, qr, h);
      k[t] = matvec(L.wqkv, qr, kr, h);
      v[t] = matvec(L.wqkv, qr + kr, kr, h);
      if (L.bqkv.size()) {
        for (Eigen::Index i = 0; i < qr; ++i) q[t][static_cast<size_t>(i)] += L.bqkv[i];
        for (Eigen::Index i = 0; i < kr; ++i) {
          k[t][static_cast<size_t>(i)] += L.bqkv[qr + i];
          v[t][static_cast<size_t>(i)] += L.bqkv[qr + kr + i];
        }
      }
      for (int h2 = 0; h2 < nh; ++h2) rope(&q[t][static_cast<size_t>(h2 * hd)], t);
      for (int h2 = 0; h2 < nkv; ++h2) rope(&k[t][static_cast<size_t>(h2 * hd)], t);
    }
    for (size_t t = 0; t < T; ++t) {
      Vec attn(static_cast<size_t>(qr), 0.0);
      for (int h2 = 0; h2 < nh; ++h2) {
        const int g = h2 / (nh / nkv);
        Vec s(t + 1);
        double mx = -1e300;
        for (size_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int i = 0; i < hd; ++i)
            dot += q[t][static_cast<size_t>(h2 * hd + i)] * k[j][static_cast<size_t>(g * hd + i)];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (size_t j = 0; j <= t; ++j) {
          for (int i = 0; i < hd; ++i) {
            attn[static_cast<size_t>(h2 * hd + i)] +=
                s[j] / sum * v[j][static_cast<size_t>(g * hd + i)];
          }
        }
      }
      const Vec o = matvec(L.wo, 0, L.wo.rows(), attn);
      for (int i = 0; i < D; ++i) x[t][static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      const Vec h = rmsnorm(x[t], L.ffn_norm);
      const Eigen::Index F = L.w_down.cols();
      const Vec gate = matvec(L.w_gate_up, 0, F, h), up = matvec(L.w_gate_up, F, F, h);
      Vec a(static_cast<size_t>(F));
      for (size_t i = 0; i < a.size(); ++i) a[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const Vec d = matvec(L.w_down, 0, L.w_down.rows(), a);
      for (int i = 0; i < D; ++i) x[t][static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
    }
  }
  std::vector<Vec> logits(T);
  for (size_t t = 0; t < T; ++t) {
    logits[t] = matvec(w.lm_head(), 0, w.lm_head().rows(), rmsnorm(x[t], w.output_norm));
  }
  return logits;
}

// max |a - b| / max(1, max |b|) over all logits.
inline double max_relative_error(const RowMatrix& got,
                                 const std::vector<std::vector<double>>& ref) {
  double err = 0, scale = 1;
  for (size_t t = 0; t < ref.size(); ++t) {
    for (size_t i = 0; i < ref[t].size(); ++i) {
      err = std::max(err, std::abs(static_cast<double>(got(static_cast<Eigen::Index>(t),
                                                           static_cast<Eigen::Index>(i))) -
                                   ref[t][i]));
      scale = std::max(scale, std::abs(ref[t][i]));
    }
  }
  return err / scale;
}

}  // namespace kvplan::test
