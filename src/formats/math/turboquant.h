// vLLM's TurboQuant rows (turboquant_* presets): rotated Lloyd-Max keys (tq_mse3/4) and per-row
// uniform values (tq_int3/4). Layouts: formats/kv_blocks.h.
#pragma once

#include "formats/math/common.h"
#include "formats/math/hadamard.h"
#include "formats/turboquant_codebooks.h"

namespace kvplan {

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
// The row in the rotated domain (what dequantize_row_tq_mse rotates back).
template <int kBits>
KVPLAN_HD inline void dequantize_row_tq_mse_rotated(const uint8_t* in, int n, float* y) {
  const float* c = tq_centroids<kBits>(n);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    y[i] = c[tq_code(in, i, kBits)];
    sum += y[i] * y[i];
  }
  const float inv = 1.0f / std::sqrt(sum + 1e-16f);
  const float norm = f16_to_f32(load_u16_le(in + n * kBits / 8));
  for (int i = 0; i < n; ++i) y[i] = norm * (y[i] * inv);
}
template <int kBits>
KVPLAN_HD inline void dequantize_row_tq_mse(const uint8_t* in, int n, float* y) {
  dequantize_row_tq_mse_rotated<kBits>(in, n, y);
  hadamard_transform(y, n);
}
// dequantize_row_tq_mse of kLanes rows (in[l] -> y[l]), each with the same operations in the same
// order, so the same bits; the rows' norm sums and butterflies run side by side in vector lanes
// instead of one dependent chain per row. kRotateBack false: dequantize_row_tq_mse_rotated's bits
// (the rows left in the rotated domain). CPU only.
template <int kBits, int kLanes, bool kRotateBack = true>
inline void dequantize_rows_tq_mse_lanes(const uint8_t* const* in, int n, float* const* y) {
  const float* c = tq_centroids<kBits>(n);
  float x[kMaxRotatedRow * kLanes];
  float sum[kLanes];
  for (int l = 0; l < kLanes; ++l) sum[l] = 0.0f;
  for (int i = 0; i < n; ++i) {
    for (int l = 0; l < kLanes; ++l) {
      const float v = c[tq_code(in[l], i, kBits)];
      x[i * kLanes + l] = v;
      sum[l] += v * v;
    }
  }
  float inv[kLanes], norm[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    inv[l] = 1.0f / std::sqrt(sum[l] + 1e-16f);
    norm[l] = f16_to_f32(load_u16_le(in[l] + n * kBits / 8));
  }
  for (int i = 0; i < n; ++i) {
    KVPLAN_OMP_SIMD()
    for (int l = 0; l < kLanes; ++l) x[i * kLanes + l] = norm[l] * (x[i * kLanes + l] * inv[l]);
  }
  if constexpr (kRotateBack) {
    hadamard_transform_lanes<kLanes>(x, n, y);
  } else {
    for (int l = 0; l < kLanes; ++l) {
      for (int i = 0; i < n; ++i) y[l][i] = x[i * kLanes + l];
    }
  }
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

}  // namespace kvplan
