// vLLM's per-(token, head) rows: fp8_per_token_head and int8_per_token_head (one f32 scale per
// row), and int4_per_token_head (the signed-Hadamard row, f32 scale and zero point).
#pragma once

#include "formats/math/common.h"
#include "formats/math/hadamard.h"
#include "formats/vllm_rht_signs.h"

namespace kvplan {

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
