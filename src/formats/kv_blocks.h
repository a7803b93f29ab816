// The byte layouts of every packed KV format, described once.
//
// ggml-compatible blocks hold 32 consecutive values of a row (head_dim for per-token packing, or
// 32 tokens of one channel for per-channel packing). Their layout is ggml's, byte for byte:
// f16 fields are IEEE half bits, little-endian; nibble j of `qs` holds value j in its low 4 bits
// and value j+16 in its high 4 bits; q5 formats keep the fifth bit of value j in bit j of `qh`.
//
// Uniform integer groups (int8/int4/int2, KIVI/KVTuner style) are
//   [f16 scale][f16 zero][codes: ceil(n * bits / 8) bytes]
// for a group of n values; code i occupies bits [i*bits, (i+1)*bits) of the code bytes read as a
// little-endian bit stream (lowest bits = first value); value = code * scale + zero.
//
// Rows are sequences of blocks/groups with no padding between them, so blocks may start at odd
// offsets: code reads and writes them byte-wise, never through these structs. The structs exist to
// document the layout and pin the sizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/kvplan_hd.h"

namespace kvplan {

// QK8_0 == QK4_0 == QK4_1 == QK5_0 == QK5_1 == QK4_NL == QK6_0
inline constexpr int kGgmlBlock = 32;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kGgmlBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kGgmlBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 minimum
  uint8_t qs[kGgmlBlock / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // fifth bits, value j -> bit j of the little-endian u32
  uint8_t qs[kGgmlBlock / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kGgmlBlock / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// ik_llama.cpp's q6_0 (mainline llama.cpp has none): codes 0..63, value = (code - 32) * d. The low
// 4 bits as in q4_0/q5_0; the top 2 bits of value v (j = v % 16) in bits 4 * (j / 8) + 2 * (v / 16)
// of qh[j % 8], so byte k holds values k, k+16, k+8, k+24 from its low bits up.
struct BlockQ6_0 {
  uint16_t d;
  uint8_t qh[kGgmlBlock / 4];
  uint8_t qs[kGgmlBlock / 2];
};
static_assert(sizeof(BlockQ6_0) == 26);

struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[kGgmlBlock / 2];  // indices into kIq4NlValues
};
static_assert(sizeof(BlockIq4Nl) == 18);

// The non-linear 4-bit codebook of ggml's IQ4_NL.
#define KVPLAN_IQ4_NL_VALUES \
  { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 }
inline constexpr int8_t kIq4NlValues[16] = KVPLAN_IQ4_NL_VALUES;
#if defined(__CUDACC__) && !defined(__HIPCC__)
// nvcc cannot read a host constexpr array from device code; each CUDA translation unit gets its
// own device copy (clang's HIP reads kIq4NlValues directly).
static __device__ const int8_t kIq4NlValuesDevice[16] = KVPLAN_IQ4_NL_VALUES;
#endif

KVPLAN_HD inline const int8_t* iq4_nl_values() {
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  return kIq4NlValuesDevice;
#else
  return kIq4NlValues;
#endif
}

// OCP MX blocks of 32 values: one E8M0 shared scale byte (2^(e - 127)), then the element codes.
// MXFP4 is ggml's block_mxfp4: element j in the low nibble of qs[j], element j + 16 in the high
// nibble. MXFP6 packs its 6-bit codes as a little-endian bit stream (element i in bits 6i..6i+5;
// no engine stores MXFP6 KV yet, so the order is kvplan's). MXFP8 stores one code per byte.
inline constexpr int kMxBlock = 32;
struct BlockMxfp4 {
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockMxfp4) == 17);
struct BlockMxfp6 {
  uint8_t e;
  uint8_t qs[24];
};
static_assert(sizeof(BlockMxfp6) == 25);
struct BlockMxfp8 {
  uint8_t e;
  uint8_t qs[32];
};
static_assert(sizeof(BlockMxfp8) == 33);

// NVFP4 row as vLLM stores one (token, head): head_dim / 2 bytes of E2M1 codes (element 2i in the
// low nibble of byte i, 2i + 1 in the high nibble), then head_dim / 16 E4M3 scales, one per 16
// values. The codes of a 16-value group are 8 bytes; the scales follow every group's codes.
// FP8 per (token, head) as vLLM's fp8_per_token_head stores it: head_dim E4M3 codes, then the row's
// f32 scale (vLLM keeps the scales in a tensor of their own in the same page).
inline constexpr int kRowScaleBytes = 4;

// Hadamard-rotated formats (q4_0_had, ...) store the blocks of the rotated row, so their bytes are
// the inner format's; the rotation needs the whole row in registers, hence a bound.
inline constexpr int kMaxRotatedRow = 512;

// The *_had64 formats rotate each span of 64 values on its own (llama.cpp's V rotation): a span
// is two ggml blocks.
inline constexpr int kHadamardSpan = 64;
inline constexpr int kHadamardSpanBlocks = kHadamardSpan / kGgmlBlock;

// A row the Hadamard-rotated formats can pack: a power of two of at most kMaxRotatedRow values
// (the transform's butterflies need the power of two; the bound keeps its scratch on the stack).
KVPLAN_HD constexpr bool rotated_row_fits(long row_values) {
  return row_values > 0 && (row_values & (row_values - 1)) == 0 && row_values <= kMaxRotatedRow;
}

// TurboQuant rows as vLLM's turboquant_* presets store a (token, KV head) in its slot
// (triton_turboquant_store.py): the codes packed densely (4-bit: element 2j in the low nibble of
// byte j; 3-bit: each 8 elements fill a 24-bit little-endian word, element i at bits 3i..3i+2),
// then the row's parameters. Keys (tq_mse*): the f16 norm of the row. Values (tq_int*): an f16
// scale, then the f16 minimum. vLLM's slot is [key row | value row], padded to an even size.
inline constexpr int kTqNormBytes = 2;
inline constexpr int kTqScaleMinBytes = 4;
// The per-head_dim tables (TurboQuant's codebooks, int4_per_token_head's signs) cover head_dim
// kMinTabulatedRow ... kMaxRotatedRow.
inline constexpr int kMinTabulatedRow = 8;

// vLLM's int4_per_token_head row: the row rotated by H D (D: vLLM's fixed random signs, H the
// unnormalized Sylvester Hadamard matrix), as 4-bit asymmetric codes (element 2j in the low nibble
// of byte j), then the row's f32 scale whose 4 low mantissa bits hold the zero point (vLLM keeps
// the scales in a tensor of their own).

inline constexpr int kNvfp4Group = 16;
inline constexpr int kNvfp4GroupCodeBytes = 8;

struct IntGroupHeader {
  uint16_t scale;  // f16: (max - min) / (2^bits - 1)
  uint16_t zero;   // f16: the group minimum
};
static_assert(sizeof(IntGroupHeader) == 4);

KVPLAN_HD inline constexpr size_t int_group_bytes(size_t n_values, int bits) {
  return sizeof(IntGroupHeader) + (n_values * static_cast<size_t>(bits) + 7) / 8;
}
static_assert(int_group_bytes(32, 4) == 20 && int_group_bytes(32, 2) == 12 &&
              int_group_bytes(32, 8) == 36 && int_group_bytes(8, 2) == 6);

}  // namespace kvplan
