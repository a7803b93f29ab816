// CPU reference paths of the KV kernels (kv_kernels.h): the same parameter structs, the same
// per-unit math (kv_row_format.h) and the same algorithm (split decode with an online softmax,
// tiles of kDecodeTile tokens, then a merge) with host pointers, single-threaded. They let every
// build test the kernels' algorithms, and `kvplan bench kernels` run without a GPU.
//
//   kvplan::gpu::Status s = kvplan::gpu::ref::pack_page(params);   // params hold host pointers
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/kv_kernels.h"

namespace kvplan::gpu::ref {

inline float fp8_scale_of(const float* scales, int head) {
  return scales ? scales[head] : 1.0f;
}

inline Status pack_page(const PackPageParams& p) {
  if (Status s = check_pack_params(p); !s.ok()) return s;
  const RowFormat& f = p.format;
  std::vector<float> row(static_cast<size_t>(f.row_values));
  for (int64_t t = 0; t < p.src.n_tokens; ++t) {
    for (int h = 0; h < p.src.n_heads; ++h) {
      for (int d = 0; d < f.row_values; ++d) row[static_cast<size_t>(d)] = p.src.load(t, h, d);
      uint8_t* out = p.dst.row(p.seq, p.first_token + t, h);
      for (int u = 0; u < f.n_units; ++u)
        quantize_row_unit(f, row.data(), u, out, fp8_scale_of(p.fp8_scales, h));
    }
  }
  return ok_status();
}

inline Status unpack_page(const UnpackPageParams& p) {
  if (Status s = check_unpack_params(p); !s.ok()) return s;
  const RowFormat& f = p.format;
  const int n_heads = p.src.n_kv_heads;
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      const uint8_t* in = p.src.row(p.seq, p.first_token + t, h);
      float* out = p.dst + (t * n_heads + h) * f.row_values;
      for (int u = 0; u < f.n_units; ++u)
        dequantize_row_unit(f, in, u, out, fp8_scale_of(p.fp8_scales, h));
    }
  }
  return ok_status();
}

// Same splits, tiles and merge as decode_attention_kernel / decode_merge_kernel.
inline Status decode_attention(const DecodeAttentionParams& p) {
  if (Status s = check_decode_params(p); !s.ok()) return s;
  const int D = p.head_dim;
  const int group = p.n_heads / p.n_kv_heads;
  const int n_splits = p.n_splits > 0
                           ? p.n_splits
                           : decode_attention_default_splits(p.batch, p.n_kv_heads, p.max_seq_len);
  const int64_t split_tokens = decode_attention_split_tokens(p.max_seq_len, n_splits);
  float* part_o = p.workspace;
  float* part_ml = p.workspace + static_cast<size_t>(p.batch) * p.n_heads * n_splits * D;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> k_tile(static_cast<size_t>(kDecodeTile) * D),
      v_tile(static_cast<size_t>(kDecodeTile) * D), scores(kDecodeTile);
  for (int b = 0; b < p.batch; ++b) {
    const int64_t len = p.seq_lens[b];
    if (len < 1 || len > p.max_seq_len)
      return invalid("seq_lens: each must be in [1, max_seq_len]", "decode_attention");
    for (int g = 0; g < p.n_kv_heads; ++g) {
      for (int s = 0; s < n_splits; ++s) {
        const int64_t t0 = s * split_tokens;
        const int64_t t1 = t0 + split_tokens < len ? t0 + split_tokens : len;
        std::vector<float> m(static_cast<size_t>(group), neg_inf), l(static_cast<size_t>(group));
        std::vector<float> acc(static_cast<size_t>(group) * D, 0.0f);
        for (int64_t tile = t0; tile < t1; tile += kDecodeTile) {
          const int n = static_cast<int>(t1 - tile < kDecodeTile ? t1 - tile : kDecodeTile);
          for (int j = 0; j < n; ++j) {
            const uint8_t* kr = p.k.row(b, tile + j, g);
            const uint8_t* vr = p.v.row(b, tile + j, g);
            for (int u = 0; u < p.k_format.n_units; ++u)
              dequantize_row_unit(p.k_format, kr, u, &k_tile[static_cast<size_t>(j) * D],
                                  fp8_scale_of(p.k_fp8_scales, g));
            for (int u = 0; u < p.v_format.n_units; ++u)
              dequantize_row_unit(p.v_format, vr, u, &v_tile[static_cast<size_t>(j) * D],
                                  fp8_scale_of(p.v_fp8_scales, g));
          }
          for (int i = 0; i < group; ++i) {
            const int h = g * group + i;
            const float* q = p.q + (static_cast<size_t>(b) * p.n_heads + h) * D;
            float tile_max = neg_inf;
            for (int j = 0; j < n; ++j) {
              float dot = 0.0f;
              for (int d = 0; d < D; ++d) dot += q[d] * k_tile[static_cast<size_t>(j) * D + d];
              scores[static_cast<size_t>(j)] = dot * p.sm_scale;
              tile_max = std::fmax(tile_max, scores[static_cast<size_t>(j)]);
            }
            const float m_new = std::fmax(m[static_cast<size_t>(i)], tile_max);
            const float alpha = std::exp(m[static_cast<size_t>(i)] - m_new);
            float sum = 0.0f;
            for (int j = 0; j < n; ++j) {
              scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - m_new);
              sum += scores[static_cast<size_t>(j)];
            }
            l[static_cast<size_t>(i)] = l[static_cast<size_t>(i)] * alpha + sum;
            m[static_cast<size_t>(i)] = m_new;
            for (int d = 0; d < D; ++d) {
              float a = acc[static_cast<size_t>(i) * D + d] * alpha;
              for (int j = 0; j < n; ++j)
                a += scores[static_cast<size_t>(j)] * v_tile[static_cast<size_t>(j) * D + d];
              acc[static_cast<size_t>(i) * D + d] = a;
            }
          }
        }
        for (int i = 0; i < group; ++i) {
          const size_t row = (static_cast<size_t>(b) * p.n_heads + g * group + i) * n_splits + s;
          for (int d = 0; d < D; ++d) part_o[row * D + d] = acc[static_cast<size_t>(i) * D + d];
          part_ml[row * 2] = m[static_cast<size_t>(i)];
          part_ml[row * 2 + 1] = l[static_cast<size_t>(i)];
        }
      }
    }
  }
  // Merge: out = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s.
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.n_heads; ++h) {
      const size_t row0 = (static_cast<size_t>(b) * p.n_heads + h) * n_splits;
      float M = neg_inf;
      for (int s = 0; s < n_splits; ++s) M = std::fmax(M, part_ml[(row0 + s) * 2]);
      float L = 0.0f;
      for (int s = 0; s < n_splits; ++s)
        L += part_ml[(row0 + s) * 2 + 1] * std::exp(part_ml[(row0 + s) * 2] - M);
      float* out = p.out + (static_cast<size_t>(b) * p.n_heads + h) * D;
      for (int d = 0; d < D; ++d) {
        float o = 0.0f;
        for (int s = 0; s < n_splits; ++s)
          o += part_o[(row0 + s) * D + d] * std::exp(part_ml[(row0 + s) * 2] - M);
        out[d] = o / L;
      }
      if (p.lse) p.lse[static_cast<size_t>(b) * p.n_heads + h] = M + std::log(L);
    }
  }
  return ok_status();
}

// Same steps as the batched_attention launcher: unpack K and V into the scratch buffers, then
// per (query, head) softmax probabilities and output.
inline Status batched_attention(const BatchedAttentionParams& p) {
  if (Status s = check_batched_params(p); !s.ok()) return s;
  UnpackPageParams uk{p.k, p.k_format, 0, 0, p.n_keys, p.k_fp8_scales, p.k_scratch};
  UnpackPageParams uv{p.v, p.v_format, 0, 0, p.n_keys, p.v_fp8_scales, p.v_scratch};
  if (Status s = unpack_page(uk); !s.ok()) return s;
  if (Status s = unpack_page(uv); !s.ok()) return s;
  const int D = p.head_dim;
  const int group = p.n_heads / p.n_kv_heads;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < p.n_queries; ++i) {
    const int64_t last = p.pos0 + i;
    const int64_t first = p.window > 0 && last + 1 > p.window ? last + 1 - p.window : 0;
    for (int h = 0; h < p.n_heads; ++h) {
      const int g = h / group;
      const float* q = p.q + (i * p.n_heads + h) * D;
      float* sc = p.scores + (static_cast<int64_t>(h) * p.n_queries + i) * p.n_keys;
      float max = neg_inf;
      for (int64_t j = 0; j < p.n_keys; ++j) {
        if (j < first || j > last) {
          sc[j] = 0.0f;
          continue;
        }
        const float* k = p.k_scratch + (j * p.n_kv_heads + g) * D;
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += q[d] * k[d];
        sc[j] = dot * p.sm_scale;
        max = std::fmax(max, sc[j]);
      }
      float sum = 0.0f;
      for (int64_t j = first; j <= last; ++j) {
        sc[j] = std::exp(sc[j] - max);
        sum += sc[j];
      }
      const float inv = 1.0f / sum;
      for (int64_t j = first; j <= last; ++j) sc[j] *= inv;
      float* out = p.out + (i * p.n_heads + h) * D;
      for (int d = 0; d < D; ++d) {
        float o = 0.0f;
        for (int64_t j = first; j <= last; ++j)
          o += sc[j] * p.v_scratch[(j * p.n_kv_heads + g) * D + d];
        out[d] = o;
      }
    }
  }
  return ok_status();
}

}  // namespace kvplan::gpu::ref
