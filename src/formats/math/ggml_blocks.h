// llama.cpp's KV cache blocks (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl; q6_0 from ik_llama.cpp): the
// reference quantizers of ggml (quantize_row_*_ref; q6_0: the cache write of ik_llama.cpp's CUDA
// copy kernel) reproduced operation for operation, so the bytes are identical; build
// with -ffp-contract=off to keep it that way. Layouts: formats/kv_blocks.h.
#pragma once

#include "formats/math/common.h"

namespace kvplan {

// ---- ggml q8_0: d = amax/127, q = roundf(x/d) ------------------------------------------------
KVPLAN_HD inline void quantize_block_q8_0(const float* x, uint8_t* out) {
  const float amax = absmax(x, kGgmlBlock);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16_le(out, f32_to_f16(d));
  for (int j = 0; j < kGgmlBlock; ++j) {
    out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(round_half_away_to_int(x[j] * id)));
  }
}
KVPLAN_HD inline void dequantize_block_q8_0(const uint8_t* in, float* y) {
  const float d = f16_to_f32(load_u16_le(in));
  for (int j = 0; j < kGgmlBlock; ++j)
    y[j] = static_cast<float>(static_cast<int8_t>(in[2 + j])) * d;
}

// ---- ggml q4_0: d = max/-8 (signed max), q = min(15, trunc(x/d + 8.5)) -----------------------
KVPLAN_HD inline void quantize_block_q4_0(const float* x, uint8_t* out) {
  const float max = signed_absmax(x, kGgmlBlock);
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16_le(out, f32_to_f16(d));
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const int q0 = static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f));
    const int q1 = static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f));
    const int c0 = q0 < 15 ? q0 : 15;
    const int c1 = q1 < 15 ? q1 : 15;
    out[2 + j] = static_cast<uint8_t>(c0 | (c1 << 4));
  }
}
KVPLAN_HD inline void dequantize_block_q4_0(const uint8_t* in, float* y) {
  const float d = f16_to_f32(load_u16_le(in));
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    y[j] = static_cast<float>((in[2 + j] & 0x0f) - 8) * d;
    y[j + 16] = static_cast<float>((in[2 + j] >> 4) - 8) * d;
  }
}

// ---- ggml q4_1: d = (max-min)/15, m = min, q = min(15, trunc((x-min)/d + 0.5)) ---------------
KVPLAN_HD inline void quantize_block_q4_1(const float* x, uint8_t* out) {
  float lo, hi;
  minmax(x, kGgmlBlock, &lo, &hi);
  const float d = (hi - lo) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16_le(out, f32_to_f16(d));
  store_u16_le(out + 2, f32_to_f16(lo));
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const int q0 = static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f));
    const int q1 = static_cast<int>(static_cast<int8_t>((x[j + 16] - lo) * id + 0.5f));
    const int c0 = q0 < 15 ? q0 : 15;
    const int c1 = q1 < 15 ? q1 : 15;
    out[4 + j] = static_cast<uint8_t>(c0 | (c1 << 4));
  }
}
KVPLAN_HD inline void dequantize_block_q4_1(const uint8_t* in, float* y) {
  const float d = f16_to_f32(load_u16_le(in));
  const float m = f16_to_f32(load_u16_le(in + 2));
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    y[j] = static_cast<float>(in[4 + j] & 0x0f) * d + m;
    y[j + 16] = static_cast<float>(in[4 + j] >> 4) * d + m;
  }
}

// ---- ggml q5_0: d = max/-16, q = min(31, trunc(x/d + 16.5)), fifth bits in qh ----------------
KVPLAN_HD inline void quantize_block_q5_0(const float* x, uint8_t* out) {
  const float max = signed_absmax(x, kGgmlBlock);
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16_le(out, f32_to_f16(d));
  uint32_t qh = 0;
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const int q0 = static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f));
    const int q1 = static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f));
    const uint32_t c0 = static_cast<uint32_t>(q0 < 31 ? q0 : 31);
    const uint32_t c1 = static_cast<uint32_t>(q1 < 31 ? q1 : 31);
    out[6 + j] = static_cast<uint8_t>((c0 & 0x0f) | ((c1 & 0x0f) << 4));
    qh |= ((c0 & 0x10u) >> 4) << j;
    qh |= ((c1 & 0x10u) >> 4) << (j + 16);
  }
  store_u32_le(out + 2, qh);
}
KVPLAN_HD inline void dequantize_block_q5_0(const uint8_t* in, float* y) {
  const float d = f16_to_f32(load_u16_le(in));
  const uint32_t qh = load_u32_le(in + 2);
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10u);
    const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10u);
    y[j] = static_cast<float>(((in[6 + j] & 0x0f) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((in[6 + j] >> 4) | h1) - 16) * d;
  }
}

// ---- ggml q5_1: d = (max-min)/31, m = min, q = trunc((x-min)/d + 0.5) -------------------------
KVPLAN_HD inline void quantize_block_q5_1(const float* x, uint8_t* out) {
  float lo, hi;
  minmax(x, kGgmlBlock, &lo, &hi);
  const float d = (hi - lo) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16_le(out, f32_to_f16(d));
  store_u16_le(out + 2, f32_to_f16(lo));
  uint32_t qh = 0;
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const uint32_t c0 = static_cast<uint8_t>((x[j] - lo) * id + 0.5f);
    const uint32_t c1 = static_cast<uint8_t>((x[j + 16] - lo) * id + 0.5f);
    out[8 + j] = static_cast<uint8_t>((c0 & 0x0f) | ((c1 & 0x0f) << 4));
    qh |= ((c0 & 0x10u) >> 4) << j;
    qh |= ((c1 & 0x10u) >> 4) << (j + 16);
  }
  store_u32_le(out + 4, qh);
}
KVPLAN_HD inline void dequantize_block_q5_1(const uint8_t* in, float* y) {
  const float d = f16_to_f32(load_u16_le(in));
  const float m = f16_to_f32(load_u16_le(in + 2));
  const uint32_t qh = load_u32_le(in + 4);
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const uint32_t h0 = ((qh >> j) << 4) & 0x10u;
    const uint32_t h1 = (qh >> (j + 12)) & 0x10u;
    y[j] = static_cast<float>((in[8 + j] & 0x0fu) | h0) * d + m;
    y[j + 16] = static_cast<float>((in[8 + j] >> 4) | h1) * d + m;
  }
}

// ---- ik_llama.cpp q6_0: d = max/-32, q = min(63, trunc(x/d + 32.5)), top two bits in qh --------
// As its CUDA cache write (cpy, quantize_f32_q6_0_block) packs a block; whether its CPU write
// refines the scale as some ggml weight quantizers do is not verified.
KVPLAN_HD inline void quantize_block_q6_0(const float* x, uint8_t* out) {
  const float max = signed_absmax(x, kGgmlBlock);
  const float d = max / -32.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16_le(out, f32_to_f16(d));
  uint8_t* qh = out + 2;
  for (int k = 0; k < kGgmlBlock / 4; ++k) qh[k] = 0;
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const int q0 = static_cast<int>(static_cast<int8_t>(x[j] * id + 32.5f));
    const int q1 = static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 32.5f));
    const uint32_t c0 = static_cast<uint32_t>(q0 < 63 ? q0 : 63);
    const uint32_t c1 = static_cast<uint32_t>(q1 < 63 ? q1 : 63);
    out[10 + j] = static_cast<uint8_t>((c0 & 0x0f) | ((c1 & 0x0f) << 4));
    const uint32_t h = (c0 >> 4) | ((c1 >> 4) << 2);
    qh[j % 8] = static_cast<uint8_t>(qh[j % 8] | (h << (4 * (j / 8))));
  }
}
KVPLAN_HD inline void dequantize_block_q6_0(const uint8_t* in, float* y) {
  const float d = f16_to_f32(load_u16_le(in));
  const uint8_t* qh = in + 2;
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const int h = qh[j % 8] >> (4 * (j / 8));
    y[j] = static_cast<float>(((in[10 + j] & 0x0f) | ((h & 0x3) << 4)) - 32) * d;
    y[j + 16] = static_cast<float>(((in[10 + j] >> 4) | ((h & 0xc) << 2)) - 32) * d;
  }
}

// ---- ggml iq4_nl: non-linear codebook, as llama.cpp writes it into a KV cache ----------------
// The nearest codebook entry; exactly between two entries the larger one wins (ggml's
// best_index_int8).
KVPLAN_HD inline int iq4_nl_nearest(float x) {
  const int8_t* val = iq4_nl_values();
  if (x <= val[0]) return 0;
  if (x >= val[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < val[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - static_cast<float>(val[hi - 1]) < static_cast<float>(val[hi]) - x ? hi - 1 : hi;
}

// ggml's quantize_row_iq4_nl_ref, which its CPU backend uses for f32 -> iq4_nl copies (the KV
// cache path): indices are the entries nearest to x / d0, d0 = max / -127 (max: the first value of
// largest |x|, which lands on entry 0), and d is the x^2-weighted least-squares scale for those
// indices. It runs no scale search (that is quantize_iq4_nl's ntry = 7, for model weights) and does
// not re-pick indices with the final d. A block with amax < 1e-15 stores d = 0 and index 0
// everywhere.
KVPLAN_HD inline void quantize_block_iq4_nl(const float* x, uint8_t* out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kGgmlBlock; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  uint8_t idx[kGgmlBlock] = {};
  float d = 0.0f;
  if (amax >= 1e-15f) {
    const float id = 1.0f / (max / static_cast<float>(iq4_nl_values()[0]));
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < kGgmlBlock; ++j) {
      const int l = iq4_nl_nearest(id * x[j]);
      idx[j] = static_cast<uint8_t>(l);
      const float q = static_cast<float>(iq4_nl_values()[l]);
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
  }
  store_u16_le(out, f32_to_f16(d));
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    out[2 + j] = static_cast<uint8_t>(idx[j] | (idx[j + 16] << 4));
  }
}
KVPLAN_HD inline void dequantize_block_iq4_nl(const uint8_t* in, float* y) {
  const float d = f16_to_f32(load_u16_le(in));
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    y[j] = d * static_cast<float>(iq4_nl_values()[in[2 + j] & 0x0f]);
    y[j + 16] = d * static_cast<float>(iq4_nl_values()[in[2 + j] >> 4]);
  }
}

}  // namespace kvplan
