// Byte layouts of the ggml "K-quant" super-blocks kvplan dequantizes when loading GGUF weights
// (Q4_K, Q5_K, Q6_K): 256 values per super-block, split into sub-blocks with their own 6- or 8-bit
// scales. Layouts per ggml's block_q4_K / block_q5_K / block_q6_K; f16 fields are IEEE half bits,
// little-endian. Like src/formats/kv_blocks.h, the structs document the layout and pin the sizes; code
// reads the bytes through offsets, never by casting unaligned pointers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvplan {

inline constexpr int kQK_K = 256;       // values per K-quant super-block
inline constexpr int kKScaleSize = 12;  // packed 6-bit scales + mins of Q4_K/Q5_K

// Q4_K: 8 sub-blocks of 32 values; value = d * scale_j * q - dmin * min_j, q in [0, 15].
struct BlockQ4K {
  uint16_t d;                   // f16 super-block scale of the sub-block scales
  uint16_t dmin;                // f16 super-block scale of the sub-block mins
  uint8_t scales[kKScaleSize];  // 8 scales and 8 mins, 6 bits each (see get_scale_min_k4)
  uint8_t qs[kQK_K / 2];        // 4-bit codes: 64-value chunks, low nibbles then high nibbles
};
static_assert(sizeof(BlockQ4K) == 144);

// Q5_K: Q4_K plus a fifth bit per value; q in [0, 31].
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];  // bit (2*chunk) / (2*chunk+1) of qh[l] = fifth bit of low / high nibble
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5K) == 176);

// Q6_K: 16 sub-blocks of 16 values; value = d * scales[j] * (q - 32), q in [0, 63].
struct BlockQ6K {
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit signed sub-block scales
  uint16_t d;                 // f16 super-block scale
};
static_assert(sizeof(BlockQ6K) == 210);

inline constexpr size_t kBlockQ4KBytes = sizeof(BlockQ4K);
inline constexpr size_t kBlockQ5KBytes = sizeof(BlockQ5K);
inline constexpr size_t kBlockQ6KBytes = sizeof(BlockQ6K);

}  // namespace kvplan
