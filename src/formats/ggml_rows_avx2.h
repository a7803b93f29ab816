// Rows of 16-bit floats and of ggml q4_0 / q4_1 / q8_0 blocks unpacked eight values per AVX2
// instruction (CPU only): the KV cache's reads (formats/pack.cpp) and the weight rows of the
// products (model/tensor_dequant.cpp). Each value takes the operations of the scalar math in
// formats/math/ggml_blocks.h and float_convert.h in the same order — float(q) * d, then + m for
// q4_1, each rounded to f32 (the build has -ffp-contract=off); f16 and bf16 widen exactly — so the
// bits are the scalar functions' (tests: Pack.*, TensorDequant.*), without a call per block.
// Builds without AVX2 and F16C (-DKVPLAN_ISA=x86-64-v2) keep the scalar functions.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__AVX2__) && defined(__F16C__)
#define KVPLAN_HAVE_AVX2_ROWS 1
#include <immintrin.h>

#include "formats/float_convert.h"
#include "formats/kv_blocks.h"
#include "formats/math/common.h"

namespace kvplan {

inline void f16_to_f32_avx2(const uint8_t* src, size_t n, float* y) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = f16_to_f32(load_u16_le(src + 2 * i));
}

inline void bf16_to_f32_avx2(const uint8_t* src, size_t n, float* y) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) y[i] = bf16_to_f32(load_u16_le(src + 2 * i));
}

// Values 0..15 of a 4-bit block are the low nibbles of its 16 bytes, values 16..31 the high ones:
// the four groups of eight, as 32-bit integers.
inline void nibbles_of_block(const uint8_t* q, __m256i out[4]) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i low_nibble = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(bytes, low_nibble);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibble);
  out[0] = _mm256_cvtepu8_epi32(lo);
  out[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8));
  out[2] = _mm256_cvtepu8_epi32(hi);
  out[3] = _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8));
}

inline void dequantize_q4_0_blocks_avx2(const uint8_t* src, size_t n_blocks, float* y) {
  const __m256i eight = _mm256_set1_epi32(8);
  for (size_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ4_0), y += 32) {
    const __m256 d = _mm256_set1_ps(f16_to_f32(load_u16_le(src)));
    __m256i q[4];
    nibbles_of_block(src + 2, q);
    for (int p = 0; p < 4; ++p) {
      const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(q[p], eight));
      _mm256_storeu_ps(y + 8 * p, _mm256_mul_ps(v, d));
    }
  }
}

inline void dequantize_q4_1_blocks_avx2(const uint8_t* src, size_t n_blocks, float* y) {
  for (size_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ4_1), y += 32) {
    const __m256 d = _mm256_set1_ps(f16_to_f32(load_u16_le(src)));
    const __m256 m = _mm256_set1_ps(f16_to_f32(load_u16_le(src + 2)));
    __m256i q[4];
    nibbles_of_block(src + 4, q);
    for (int p = 0; p < 4; ++p) {
      const __m256 v = _mm256_cvtepi32_ps(q[p]);
      _mm256_storeu_ps(y + 8 * p, _mm256_add_ps(_mm256_mul_ps(v, d), m));
    }
  }
}

inline void dequantize_q8_0_blocks_avx2(const uint8_t* src, size_t n_blocks, float* y) {
  for (size_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ8_0), y += 32) {
    const __m256 d = _mm256_set1_ps(f16_to_f32(load_u16_le(src)));
    for (int p = 0; p < 4; ++p) {
      const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + 8 * p));
      const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes));
      _mm256_storeu_ps(y + 8 * p, _mm256_mul_ps(v, d));
    }
  }
}

}  // namespace kvplan

#endif  // __AVX2__ && __F16C__
