// Quantize/dequantize math for every packed KV format: one block or group at a time, pure inline
// functions compiled for both the CPU (src/formats) and the GPU kernels, so both produce identical
// codes. Layouts are in kv_blocks.h. The ggml-compatible quantizers reproduce ggml's reference
// quantizers (quantize_row_*_ref) operation for operation — same rounding, same order of float
// operations — so their bytes are identical; build with -ffp-contract=off to keep it that way.
//
//   uint8_t block[18];
//   kvplan::quantize_block_q4_0(x, block);       // x: 32 floats
//   kvplan::dequantize_block_q4_0(block, y);
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "formats/float_convert.h"
#include "formats/kv_blocks.h"
#include "formats/kvplan_hd.h"
#include "formats/turboquant_codebooks.h"
#include "formats/vllm_rht_signs.h"

namespace kvplan {

#if !defined(__HIPCC__) && !defined(__CUDACC__)
// Packed words are stored with memcpy of their low bytes, which is little-endian order only on
// little-endian machines (x86-64, ARM64 Linux, every GPU kvplan targets).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "kvplan's byte formats assume little-endian");
#endif

KVPLAN_HD inline uint16_t load_u16_le(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
KVPLAN_HD inline void store_u16_le(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
KVPLAN_HD inline uint32_t load_u32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
KVPLAN_HD inline void store_u32_le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

KVPLAN_HD inline float fmaxf_hd(float a, float b) {
  return a > b ? a : b;
}
KVPLAN_HD inline float fminf_hd(float a, float b) {
  return a < b ? a : b;
}

// Min/max reductions are exact, so their evaluation order does not change the result; an OpenMP
// SIMD reduction lets the host compiler vectorise them without -ffast-math (device code ignores
// it).
#if defined(__HIPCC__) || defined(__CUDACC__)
#define KVPLAN_OMP_SIMD(...)
#else
#define KVPLAN_PRAGMA(text) _Pragma(#text)
#define KVPLAN_OMP_SIMD(...) KVPLAN_PRAGMA(omp simd __VA_ARGS__)
#endif

KVPLAN_HD inline float absmax(const float* x, int n) {
  float m = 0.0f;
  KVPLAN_OMP_SIMD(reduction(max : m))
  for (int j = 0; j < n; ++j) m = fmaxf_hd(m, std::fabs(x[j]));
  return m;
}

// The first element equal to `value`: recovers the sign a sequential scan would keep when the
// extreme is +-0 (ggml's `if (v < min) min = v` keeps the first zero it meets).
KVPLAN_HD inline float first_equal(const float* x, int n, float value) {
  for (int j = 0; j < n; ++j) {
    if (x[j] == value) return x[j];
  }
  return value;
}

KVPLAN_HD inline void minmax(const float* x, int n, float* out_min, float* out_max) {
  float lo = x[0], hi = x[0];
  KVPLAN_OMP_SIMD(reduction(min : lo) reduction(max : hi))
  for (int j = 0; j < n; ++j) {
    lo = fminf_hd(lo, x[j]);
    hi = fmaxf_hd(hi, x[j]);
  }
  *out_min = lo == 0.0f ? first_equal(x, n, lo) : lo;
  *out_max = hi == 0.0f ? first_equal(x, n, hi) : hi;
}

// The value of largest magnitude, keeping its sign; the first one wins ties (ggml's rule). The
// vectorised min and max decide it unless +a and -a both occur, when a scan finds the first.
KVPLAN_HD inline float signed_absmax(const float* x, int n) {
  float lo, hi;
  minmax(x, n, &lo, &hi);
  if (hi > -lo) return hi;
  if (-lo > hi) return lo;
  if (hi == 0.0f) return 0.0f;  // all zeros: ggml keeps max = 0
  const float amax = hi;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) == amax) return x[j];
  }
  return 0.0f;  // only reachable with NaN input
}

// C's roundf (halves away from zero) to int for |v| < 2^31, written so that it vectorises:
// v - trunc(v) is exact, so comparing it with +-0.5 decides the rounding exactly as roundf does.
KVPLAN_HD inline int round_half_away_to_int(float v) {
  const int t = static_cast<int>(v);
  const float frac = v - static_cast<float>(t);
  return t + (frac >= 0.5f) - (frac <= -0.5f);
}

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

// ---- uniform asymmetric integers (KIVI / KVTuner): scale = (max-min)/(2^b-1), zero = min -------
// Codes are computed against the f16-rounded scale and zero that dequantization will use, so the
// error of every value is at most half a step plus the f16 rounding of the zero point. The code is
// rint((x - zero) / scale) with a true division: multiplying by a rounded 1/scale picks the farther
// code for some values within an ulp of a half step (tests/formats/kv_golden_test.cpp has them).
KVPLAN_HD inline float saturate_to_f16_range(float v) {
  return fminf_hd(fmaxf_hd(v, -65504.0f), 65504.0f);
}

template <int kBits>
KVPLAN_HD inline uint32_t int_code(float x, float zero, float divisor) {
  const float q = std::rint((x - zero) / divisor);
  // Through int: float -> unsigned has no vector instruction before AVX-512.
  return static_cast<uint32_t>(
      static_cast<int>(fminf_hd(fmaxf_hd(q, 0.0f), static_cast<float>((1 << kBits) - 1))));
}

// Packs eight codes held one per byte of a little-endian u64 (each < 2^kBits) into the low kBits
// bytes, first code in the lowest bits — the int formats' bit order.
template <int kBits>
KVPLAN_HD inline uint64_t pack_codes_u64(uint64_t w) {
  if constexpr (kBits == 8) {
    return w;
  } else if constexpr (kBits == 4) {
    w = (w | (w >> 4)) & 0x00FF00FF00FF00FFull;
    w = (w | (w >> 8)) & 0x0000FFFF0000FFFFull;
    return (w | (w >> 16)) & 0xFFFFFFFFull;
  } else {
    static_assert(kBits == 2);
    w = (w | (w >> 6)) & 0x000F000F000F000Full;
    w = (w | (w >> 12)) & 0x000000FF000000FFull;
    return (w | (w >> 24)) & 0xFFFFull;
  }
}

template <int kBits>
KVPLAN_HD inline void quantize_group_int(const float* x, int n, uint8_t* out) {
  constexpr int kMaxCode = (1 << kBits) - 1;
  constexpr int kPerByte = 8 / kBits;
  float lo, hi;
  minmax(x, n, &lo, &hi);
  const uint16_t scale_h =
      f32_to_f16(saturate_to_f16_range((hi - lo) / static_cast<float>(kMaxCode)));
  const uint16_t zero_h = f32_to_f16(saturate_to_f16_range(lo));
  store_u16_le(out, scale_h);
  store_u16_le(out + 2, zero_h);
  const float scale = f16_to_f32(scale_h);
  const float zero = f16_to_f32(zero_h);
  // A scale that rounds to 0 in f16 stores code 0 everywhere: dividing by +inf gives +-0.
  const float divisor = scale > 0.0f ? scale : f32_from_bits(0x7f800000u);
  uint8_t* codes = out + sizeof(IntGroupHeader);
  // Codes go through a small buffer: computing them is the vectorisable part, bit-packing a
  // handful of bytes is not (and a 2-bit group of 32 fills only 8 bytes).
  constexpr int kChunk = 64;
  uint8_t chunk[kChunk];
  for (int base = 0; base < n; base += kChunk) {
    const int len = n - base < kChunk ? n - base : kChunk;
    for (int i = 0; i < len; ++i)
      chunk[i] = static_cast<uint8_t>(int_code<kBits>(x[base + i], zero, divisor));
    for (int i = len; i % kPerByte != 0; ++i) chunk[i] = 0;  // pad the last partial byte
    const int n_bytes = (len + kPerByte - 1) / kPerByte;
    int b = 0;
    // Eight codes at a time: fold the bytes of a little-endian u64 into kBits-wide fields.
    for (; (b + kBits) * kPerByte <= len; b += kBits) {
      uint64_t w;
      std::memcpy(&w, chunk + b * kPerByte, sizeof w);
      w = pack_codes_u64<kBits>(w);
      std::memcpy(codes + base / kPerByte + b, &w, kBits);  // little-endian: low bytes first
    }
    for (; b < n_bytes; ++b) {
      uint32_t byte = 0;
      for (int k = 0; k < kPerByte; ++k) {
        byte |= static_cast<uint32_t>(chunk[b * kPerByte + k]) << (k * kBits);
      }
      codes[base / kPerByte + b] = static_cast<uint8_t>(byte);
    }
  }
}

template <int kBits>
KVPLAN_HD inline void dequantize_group_int(const uint8_t* in, int n, float* y) {
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  constexpr int kPerByte = 8 / kBits;
  const float scale = f16_to_f32(load_u16_le(in));
  const float zero = f16_to_f32(load_u16_le(in + 2));
  const uint8_t* codes = in + sizeof(IntGroupHeader);
  const int whole_bytes = n / kPerByte;
  for (int b = 0; b < whole_bytes; ++b) {
    for (int k = 0; k < kPerByte; ++k) {
      y[b * kPerByte + k] = static_cast<float>((codes[b] >> (k * kBits)) & kMask) * scale + zero;
    }
  }
  for (int i = whole_bytes * kPerByte; i < n; ++i) {
    const uint32_t code = (codes[i / kPerByte] >> ((i % kPerByte) * kBits)) & kMask;
    y[i] = static_cast<float>(code) * scale + zero;
  }
}

// ---- OCP MX: blocks of 32 with an E8M0 shared scale (kv_blocks.h) ------------------------------
// ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128), half of the E8M0 value, because ggml's MXFP4 codebook
// holds the E2M1 values doubled.
KVPLAN_HD inline float e8m0_half_to_f32(uint8_t e) {
  return pow2f_wide(static_cast<int>(e) - 128);
}

// ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (0 for an all-zero block), and
// each code is the first of the 16 codebook entries k*d (d = 2^(e - 128), k = 2 * E2M1) nearest to
// x, which sends ties to the smaller magnitude and zero to +0. ggml takes floor(log2f(amax));
// kvplan takes the exact floor (floor_log2), which differs only for amax within 2^-24 relative
// below a power of two, where log2f rounds up. e is clamped to a byte (amax < 2^-125 gives 0).
KVPLAN_HD inline void quantize_block_mxfp4(const float* x, uint8_t* out) {
  const float amax = absmax(x, kMxBlock);
  int e = amax > 0.0f ? floor_log2(amax) - 2 + 127 : 0;
  e = e < 0 ? 0 : (e > 254 ? 254 : e);
  const float d = e8m0_half_to_f32(static_cast<uint8_t>(e));
  uint8_t q[kMxBlock];
  for (int j = 0; j < kMxBlock; ++j) {
    int best = 0;
    float best_err = std::fabs(0.0f * d - x[j]);
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(2.0f * fp4_e2m1_to_f32(static_cast<uint8_t>(i)) * d - x[j]);
      if (err < best_err) {
        best = i;
        best_err = err;
      }
    }
    q[j] = static_cast<uint8_t>(best);
  }
  out[0] = static_cast<uint8_t>(e);
  for (int j = 0; j < kMxBlock / 2; ++j) {
    out[1 + j] = static_cast<uint8_t>(q[j] | (q[j + kMxBlock / 2] << 4));
  }
}
KVPLAN_HD inline void dequantize_block_mxfp4(const uint8_t* in, float* y) {
  const float d = e8m0_half_to_f32(in[0]);
  for (int j = 0; j < kMxBlock / 2; ++j) {
    y[j] = 2.0f * fp4_e2m1_to_f32(in[1 + j] & 0x0f) * d;
    y[j + kMxBlock / 2] = 2.0f * fp4_e2m1_to_f32(in[1 + j] >> 4) * d;
  }
}

// OCP's shared exponent (Microsoft's microxcaling reference): floor(log2(amax)) minus the element
// type's largest exponent, clamped to E8M0's [-127, 127]; an all-zero block takes FP32's smallest
// normal as its amax. Elements are x / 2^shared converted with round-to-nearest-even, saturating.
template <int kElementEmax>
KVPLAN_HD inline int mx_shared_exponent(float amax) {
  const int shared = (amax > 0.0f ? floor_log2(amax) : -126) - kElementEmax;
  return shared < -127 ? -127 : (shared > 127 ? 127 : shared);
}

// MXFP8 E4M3 (element emax 8, max 448): one code per byte.
KVPLAN_HD inline void quantize_block_mxfp8_e4m3(const float* x, uint8_t* out) {
  const int shared = mx_shared_exponent<8>(absmax(x, kMxBlock));
  const float inv = pow2f_wide(-shared);
  out[0] = static_cast<uint8_t>(shared + 127);
  for (int j = 0; j < kMxBlock; ++j) out[1 + j] = f32_to_fp8_e4m3(x[j] * inv);
}
KVPLAN_HD inline void dequantize_block_mxfp8_e4m3(const uint8_t* in, float* y) {
  const float scale = pow2f_wide(static_cast<int>(in[0]) - 127);
  for (int j = 0; j < kMxBlock; ++j) y[j] = fp8_e4m3_to_f32(in[1 + j]) * scale;
}

// MXFP6 E2M3 (element emax 2, max 7.5): four 6-bit codes in three bytes, little-endian.
KVPLAN_HD inline void quantize_block_mxfp6_e2m3(const float* x, uint8_t* out) {
  const int shared = mx_shared_exponent<2>(absmax(x, kMxBlock));
  const float inv = pow2f_wide(-shared);
  out[0] = static_cast<uint8_t>(shared + 127);
  for (int j = 0; j < kMxBlock; j += 4) {
    uint32_t word = 0;
    for (int k = 0; k < 4; ++k) {
      word |= static_cast<uint32_t>(f32_to_fp6_e2m3(x[j + k] * inv)) << (6 * k);
    }
    uint8_t* dst = out + 1 + j / 4 * 3;
    dst[0] = static_cast<uint8_t>(word);
    dst[1] = static_cast<uint8_t>(word >> 8);
    dst[2] = static_cast<uint8_t>(word >> 16);
  }
}
KVPLAN_HD inline void dequantize_block_mxfp6_e2m3(const uint8_t* in, float* y) {
  const float scale = pow2f_wide(static_cast<int>(in[0]) - 127);
  for (int j = 0; j < kMxBlock; j += 4) {
    const uint8_t* src = in + 1 + j / 4 * 3;
    const uint32_t word = static_cast<uint32_t>(src[0]) | (static_cast<uint32_t>(src[1]) << 8) |
                          (static_cast<uint32_t>(src[2]) << 16);
    for (int k = 0; k < 4; ++k) {
      y[j + k] = fp6_e2m3_to_f32(static_cast<uint8_t>((word >> (6 * k)) & 0x3fu)) * scale;
    }
  }
}

// ---- NVFP4: 16 E2M1 codes with an E4M3 scale, over an f32 scale per (layer, head) ------------
// vLLM's store (nvfp4_kv_cache_kernels.cu, cvt_warp_fp16_to_fp4) with global = 1 / tensor_scale:
// sf = e4m3(global * (amax * (1/6))), codes = E2M1(x * 1 / (sf * (1 / global))), 0 when sf is 0.
// vLLM computes the three reciprocals with rcp.approx.ftz; kvplan divides exactly, so a value whose
// product lands within an approximate reciprocal's error of a rounding boundary can take the
// neighbouring code there. Element 2i goes to the low nibble of byte i.
KVPLAN_HD inline void quantize_group_nvfp4(const float* x, float tensor_scale, uint8_t* codes,
                                           uint8_t* scale) {
  const float global = 1.0f / tensor_scale;
  const float amax = absmax(x, kNvfp4Group);
  const uint8_t sf = f32_to_fp8_e4m3(global * (amax * (1.0f / 6.0f)));
  const float sf_value = fp8_e4m3_to_f32(sf);
  const float out_scale = sf_value != 0.0f ? 1.0f / (sf_value * (1.0f / global)) : 0.0f;
  for (int i = 0; i < kNvfp4Group / 2; ++i) {
    codes[i] = static_cast<uint8_t>(f32_to_fp4_e2m1(x[2 * i] * out_scale) |
                                    (f32_to_fp4_e2m1(x[2 * i + 1] * out_scale) << 4));
  }
  *scale = sf;
}
KVPLAN_HD inline void dequantize_group_nvfp4(const uint8_t* codes, uint8_t scale,
                                             float tensor_scale, float* y) {
  const float sf = fp8_e4m3_to_f32(scale);
  for (int i = 0; i < kNvfp4Group / 2; ++i) {
    y[2 * i] = fp4_e2m1_to_f32(codes[i] & 0x0f) * sf * tensor_scale;
    y[2 * i + 1] = fp4_e2m1_to_f32(codes[i] >> 4) * sf * tensor_scale;
  }
}

// ---- vLLM's per-(token, head) rows: fp8_per_token_head, int8_per_token_head -------------------
// One store kernel writes both (its QUANT_MAX is 448 or 127): the row's scale is its absmax over
// the code range, at least 1e-6, kept as f32 after the codes.
KVPLAN_HD inline float vllm_per_token_head_scale(const float* x, int n, float code_max) {
  return fmaxf_hd(absmax(x, n) / code_max, 1e-6f);
}

// s = max(amax / 448, 1e-6), codes = E4M3(x * (1 / s)) saturating (vLLM clamps to +-448, then
// casts with round-to-nearest-even), then s as f32 after the codes.
KVPLAN_HD inline void quantize_row_fp8_per_token_head(const float* x, int n, uint8_t* out) {
  const float s = vllm_per_token_head_scale(x, n, kFp8E4m3Max);
  const float inv = 1.0f / s;
  for (int i = 0; i < n; ++i) out[i] = f32_to_fp8_e4m3(x[i] * inv);
  store_u32_le(out + n, f32_bits(s));
}
KVPLAN_HD inline void dequantize_row_fp8_per_token_head(const uint8_t* in, int n, float* y) {
  const float s = f32_from_bits(load_u32_le(in + n));
  for (int i = 0; i < n; ++i) y[i] = fp8_e4m3_to_f32(in[i]) * s;
}

// s = max(amax / 127, 1e-6), then x * (1 / s) in f32 with 0.5 added away from zero and the sum
// truncated (vLLM's store adds the half, clamps to [-128, 127] and lets the int8 store truncate;
// the f32 sum rounds, so 0.49999997 becomes 1, as in vLLM), then s as f32 after the codes.
KVPLAN_HD inline void quantize_row_int8_per_token_head(const float* x, int n, uint8_t* out) {
  const float s = vllm_per_token_head_scale(x, n, 127.0f);
  const float inv = 1.0f / s;
  for (int i = 0; i < n; ++i) {
    const float q = x[i] * inv;
    const float biased = q >= 0.0f ? q + 0.5f : q - 0.5f;
    const float clamped = fminf_hd(fmaxf_hd(biased, -128.0f), 127.0f);
    out[i] = static_cast<uint8_t>(static_cast<int8_t>(clamped));
  }
  store_u32_le(out + n, f32_bits(s));
}
KVPLAN_HD inline void dequantize_row_int8_per_token_head(const uint8_t* in, int n, float* y) {
  const float s = f32_from_bits(load_u32_le(in + n));
  for (int i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int8_t>(in[i])) * s;
}

// ---- Hadamard-rotated rows (q4_0_had, ...) --------------------------------------------------
// The normalized Walsh-Hadamard transform of n values (n a power of two), in place: log2(n)
// butterfly passes of (a + b, a - b), then a scale of 1/sqrt(n). It is orthonormal and its own
// inverse, so dequantization applies it again. One fixed order of operations on CPU and GPU.
KVPLAN_HD inline void hadamard_butterflies(float* x, int n) {
  for (int half = 1; half < n; half *= 2) {
    for (int start = 0; start < n; start += 2 * half) {
      for (int i = start; i < start + half; ++i) {
        const float a = x[i], b = x[i + half];
        x[i] = a + b;
        x[i + half] = a - b;
      }
    }
  }
}
KVPLAN_HD inline void hadamard_transform(float* x, int n) {
  hadamard_butterflies(x, n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

// ---- TurboQuant (vLLM's turboquant_* presets; layouts in kv_blocks.h) ------------------------
inline constexpr float kTqCentroids3[7][8] = KVPLAN_TQ_CENTROIDS_3;
inline constexpr float kTqCentroids4[7][16] = KVPLAN_TQ_CENTROIDS_4;
#if defined(__CUDACC__) && !defined(__HIPCC__)
static __device__ const float kTqCentroids3Device[7][8] = KVPLAN_TQ_CENTROIDS_3;
static __device__ const float kTqCentroids4Device[7][16] = KVPLAN_TQ_CENTROIDS_4;
#endif

// vLLM's codebook for a row of n values (a power of two in [kMinTabulatedRow, kMaxRotatedRow]):
// 2^kBits sorted centroids.
template <int kBits>
KVPLAN_HD inline const float* tq_centroids(int n) {
  int slot = 0;
  while ((kMinTabulatedRow << slot) < n) ++slot;
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  if constexpr (kBits == 3) return kTqCentroids3Device[slot];
  return kTqCentroids4Device[slot];
#else
  if constexpr (kBits == 3) return kTqCentroids3[slot];
  return kTqCentroids4[slot];
#endif
}

// Packs code_of(0 .. n-1) (each < 2^bits, bits 3 or 4; n a multiple of 8) into out.
template <typename CodeOf>
KVPLAN_HD inline void tq_pack_codes(int n, int bits, uint8_t* out, CodeOf code_of) {
  if (bits == 4) {
    for (int j = 0; j < n / 2; ++j) {
      out[j] = static_cast<uint8_t>(code_of(2 * j) | (code_of(2 * j + 1) << 4));
    }
    return;
  }
  for (int g = 0; g < n / 8; ++g) {
    uint32_t word = 0;
    for (int i = 0; i < 8; ++i) word |= static_cast<uint32_t>(code_of(8 * g + i)) << (3 * i);
    out[3 * g] = static_cast<uint8_t>(word);
    out[3 * g + 1] = static_cast<uint8_t>(word >> 8);
    out[3 * g + 2] = static_cast<uint8_t>(word >> 16);
  }
}
KVPLAN_HD inline int tq_code(const uint8_t* in, int i, int bits) {
  const int bit = i * bits;
  const uint32_t two = in[bit / 8] | (bit % 8 + bits > 8 ? in[bit / 8 + 1] << 8 : 0u);
  return static_cast<int>((two >> (bit % 8)) & ((1u << bits) - 1u));
}

// Keys (tq_mse3/4), vLLM's MSE store: y = (x / (|x| + 1e-8)) rotated by the orthonormal
// Sylvester Hadamard matrix; each y_j takes the index of the first midpoint (c_i + c_i+1) / 2 of
// the f32 centroids above it (y equal to a midpoint goes up); then |x| as f16. vLLM rotates with a
// GEMM against the f32 matrix and takes |x| with torch's reduction; kvplan uses the butterflies of
// hadamard_transform and a sequential sum, so a y within rounding of a midpoint (or a norm within
// rounding of an f16 tie) can land on the other side there.
template <int kBits>
KVPLAN_HD inline void quantize_row_tq_mse(const float* x, int n, uint8_t* out) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  const float norm = std::sqrt(sum);
  const float denom = norm + 1e-8f;
  float y[kMaxRotatedRow];
  for (int i = 0; i < n; ++i) y[i] = x[i] / denom;
  hadamard_transform(y, n);
  const float* c = tq_centroids<kBits>(n);
  tq_pack_codes(n, kBits, out, [&](int i) {
    uint32_t idx = 0;
    while (idx < (1u << kBits) - 1 && y[i] >= (c[idx] + c[idx + 1]) / 2.0f) ++idx;
    return idx;
  });
  store_u16_le(out + n * kBits / 8, f32_to_f16(norm));
}
// vLLM's norm_correction (every MSE preset): the gathered centroids are scaled to unit length
// (1 / sqrt(sum c^2 + 1e-16)), times the stored norm; kvplan then rotates back, where vLLM keeps
// keys rotated and rotates the query instead (the same attention scores).
template <int kBits>
KVPLAN_HD inline void dequantize_row_tq_mse(const uint8_t* in, int n, float* y) {
  const float* c = tq_centroids<kBits>(n);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    y[i] = c[tq_code(in, i, kBits)];
    sum += y[i] * y[i];
  }
  const float inv = 1.0f / std::sqrt(sum + 1e-16f);
  const float norm = f16_to_f32(load_u16_le(in + n * kBits / 8));
  for (int i = 0; i < n; ++i) y[i] = norm * (y[i] * inv);
  hadamard_transform(y, n);
}

// Values (tq_int3/4), vLLM's uniform store over the whole row: scale = (max - min) / (2^b - 1)
// in f32 (at least 1e-8), q = trunc((x - min) / scale + 0.5) clamped, then f16 scale and f16 min.
// Codes use the f32 scale, dequantization the f16 one (as vLLM's).
template <int kBits>
KVPLAN_HD inline void quantize_row_tq_int(const float* x, int n, uint8_t* out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  constexpr int kMax = (1 << kBits) - 1;
  float scale = (hi - lo) / static_cast<float>(kMax);
  if (!(scale > 1e-8f)) scale = 1e-8f;
  tq_pack_codes(n, kBits, out, [&](int i) {
    const float t = (x[i] - lo) / scale + 0.5f;  // >= 0.5 unless x is NaN
    return !(t >= 1.0f)                    ? 0u
           : t >= static_cast<float>(kMax) ? static_cast<uint32_t>(kMax)
                                           : static_cast<uint32_t>(t);
  });
  store_u16_le(out + n * kBits / 8, f32_to_f16(scale));
  store_u16_le(out + n * kBits / 8 + 2, f32_to_f16(lo));
}
template <int kBits>
KVPLAN_HD inline void dequantize_row_tq_int(const uint8_t* in, int n, float* y) {
  const float scale = f16_to_f32(load_u16_le(in + n * kBits / 8));
  const float lo = f16_to_f32(load_u16_le(in + n * kBits / 8 + 2));
  for (int i = 0; i < n; ++i) y[i] = static_cast<float>(tq_code(in, i, kBits)) * scale + lo;
}

// ---- vLLM int4_per_token_head (layout in kv_blocks.h) -----------------------------------------
inline constexpr uint32_t kVllmRhtSigns[7][kMaxRotatedRow / 32] = KVPLAN_VLLM_RHT_SIGNS;
#if defined(__CUDACC__) && !defined(__HIPCC__)
static __device__ const uint32_t kVllmRhtSignsDevice[7][kMaxRotatedRow / 32] =
    KVPLAN_VLLM_RHT_SIGNS;
#endif
// -1 where vLLM's sign vector for rows of n values (a power of two in [kMinTabulatedRow,
// kMaxRotatedRow]) is negative, else +1.
KVPLAN_HD inline float vllm_rht_sign(int n, int i) {
  int slot = 0;
  while ((kMinTabulatedRow << slot) < n) ++slot;
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  const uint32_t word = kVllmRhtSignsDevice[slot][i / 32];
#else
  const uint32_t word = kVllmRhtSigns[slot][i / 32];
#endif
  return (word >> (i % 32)) & 1u ? -1.0f : 1.0f;
}

// vLLM rounds half away from zero by truncating x +- 0.5, then clamps to [0, 15].
KVPLAN_HD inline uint32_t vllm_int4_round(float x) {
  const float t = x >= 0.0f ? x + 0.5f : x - 0.5f;
  return !(t >= 1.0f) ? 0u : t >= 15.0f ? 15u : static_cast<uint32_t>(t);
}

// vLLM's reshape_and_cache_int4 on an f32 row (its CPU rotation, then its write kernel): r = H (s
// x) unnormalized; scale = max((max - min) / 15, 1e-6); zero point zp = round(-min / scale); codes
// round(r * (1 / scale) + zp), both rounded half away and clamped to [0, 15]; the scale's 4 low
// mantissa bits replaced by zp. vLLM casts r to the model's dtype (bf16, f16) before the kernel,
// and on a GPU rotates with hadacore or a Triton matmul in bf16 and divides with div.full.f32;
// kvplan keeps r in f32 (vLLM's path for f32 rows) and divides exactly.
KVPLAN_HD inline void quantize_row_int4_per_token_head(const float* x, int n, uint8_t* out) {
  float r[kMaxRotatedRow];
  for (int i = 0; i < n; ++i) r[i] = x[i] * vllm_rht_sign(n, i);
  hadamard_butterflies(r, n);
  float lo = r[0], hi = r[0];
  for (int i = 1; i < n; ++i) {
    lo = r[i] < lo ? r[i] : lo;
    hi = r[i] > hi ? r[i] : hi;
  }
  const float scale = fmaxf_hd((hi - lo) / 15.0f, 1e-6f);
  const uint32_t zp = vllm_int4_round(-lo / scale);
  const float zero = static_cast<float>(zp), inv = 1.0f / scale;
  for (int j = 0; j < n / 2; ++j) {
    out[j] = static_cast<uint8_t>(vllm_int4_round(r[2 * j] * inv + zero) |
                                  (vllm_int4_round(r[2 * j + 1] * inv + zero) << 4));
  }
  store_u32_le(out + n / 2, (f32_bits(scale) & ~15u) | zp);
}
// Rotated values (code - zp) * scale (its zero-point bits cleared), then vLLM's inverse: the
// Hadamard transform, the signs, and 1 / n.
KVPLAN_HD inline void dequantize_row_int4_per_token_head(const uint8_t* in, int n, float* y) {
  const uint32_t bits = load_u32_le(in + n / 2);
  const float zero = static_cast<float>(bits & 15u), scale = f32_from_bits(bits & ~15u);
  for (int j = 0; j < n / 2; ++j) {
    y[2 * j] = (static_cast<float>(in[j] & 15u) - zero) * scale;
    y[2 * j + 1] = (static_cast<float>(in[j] >> 4) - zero) * scale;
  }
  hadamard_butterflies(y, n);
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int i = 0; i < n; ++i) y[i] = y[i] * vllm_rht_sign(n, i) * inv_n;
}

}  // namespace kvplan
