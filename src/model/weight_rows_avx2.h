// Weight rows of Q4_1 and Q8_0 blocks dequantized eight values per AVX2 instruction (internal;
// tensor_dequant.cpp). Each value takes the operations of the block math in formats/math/
// ggml_blocks.h in the same order — float(q) * d, then + m for Q4_1, each rounded to f32 (the build
// has -ffp-contract=off) — so the bits are those of dequantize_block_q4_1 / _q8_0 (tested), only
// without a call per block: decoding reads every weight row once per token. Builds without AVX2
// (-DKVPLAN_ISA=x86-64-v2) keep the block functions.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>

#include "formats/float_convert.h"
#include "formats/kv_blocks.h"

namespace kvplan {

inline void store_scaled(__m256i codes, __m256 d, float* y) {
  _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(codes), d));
}

inline void dequantize_row_q4_1_avx2(const uint8_t* src, size_t n_blocks, float* y) {
  const __m128i low_nibble = _mm_set1_epi8(0x0f);
  for (size_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ4_1), y += 32) {
    const __m256 d = _mm256_set1_ps(f16_to_f32(load_u16_le(src)));
    const __m256 m = _mm256_set1_ps(f16_to_f32(load_u16_le(src + 2)));
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 4));
    // Values 0..15 are the low nibbles of the 16 bytes, values 16..31 the high ones.
    const __m128i lo = _mm_and_si128(bytes, low_nibble);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibble);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int p = 0; p < 4; ++p) {
      const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[p]));
      _mm256_storeu_ps(y + 8 * p, _mm256_add_ps(_mm256_mul_ps(q, d), m));
    }
  }
}

inline void dequantize_row_q8_0_avx2(const uint8_t* src, size_t n_blocks, float* y) {
  for (size_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ8_0), y += 32) {
    const __m256 d = _mm256_set1_ps(f16_to_f32(load_u16_le(src)));
    for (int p = 0; p < 4; ++p) {
      const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + 8 * p));
      store_scaled(_mm256_cvtepi8_epi32(codes), d, y + 8 * p);
    }
  }
}

}  // namespace kvplan

#endif  // __AVX2__
