// A packed row's geometry and the per-unit pack/unpack dispatch shared by the CPU (src/formats),
// the GPU kernels and their CPU reference paths, all read from the format table
// (kv_format_table.h). A row (head_dim values of one token and KV head) is a sequence of "units"
// packed independently: a block (ggml, MX: 32 values; NVFP4: 16), a uniform-int group (group_size
// clamped to the row; the last one may be shorter), or 32 values of a plain/FP8 format. Unit u
// starts at value u * unit_values and byte u * unit_bytes; a split-block format (NVFP4) keeps unit
// u's scale byte at scale_offset + u. A thread can pack or unpack any unit on its own.
//
//   kvplan::RowFormat f;
//   if (kvplan::make_row_format(kvplan::kFmtQ4_0, 128, 32, &f)) { /* f.row_bytes == 72 */ }
//   for (int u = 0; u < f.n_units; ++u) kvplan::quantize_row_unit(f, x, u, row, 1.0f);
#pragma once

#include <cstdint>

#include "formats/float_convert.h"
#include "formats/kv_blocks.h"
#include "formats/kv_format_math.h"
#include "formats/kv_format_table.h"
#include "formats/kvplan_hd.h"

namespace kvplan {

// Rows longer than this are refused by make_row_format (device code keeps a unit in registers or
// local memory, and int groups may span the whole row).
inline constexpr int kMaxRowValues = 512;
// Values per unit of the plain and FP8 formats (one thread's share of a row).
inline constexpr int kPlainUnitValues = 32;

struct RowFormat {
  uint16_t id = 0;       // FormatId value
  int row_values = 0;    // head_dim
  int unit_values = 0;   // values per full unit
  int unit_bytes = 0;    // bytes per full unit
  int n_units = 0;       // ceil(row_values / unit_values)
  int row_bytes = 0;     // equals packed_row_bytes(format, row_values, group_size)
  int scale_offset = 0;  // split-block formats: byte where the units' scale bytes start; else 0
};

// Values in unit u (the last unit of an int or plain row may be shorter).
KVPLAN_HD inline int row_unit_values(const RowFormat& f, int u) {
  const int rest = f.row_values - u * f.unit_values;
  return rest < f.unit_values ? rest : f.unit_values;
}

// Fills `out` and returns true when `id` can pack rows of `row_values` values with `group_size`;
// false otherwise (unknown id, a ggml row that is not whole blocks, group 0, a row over
// kMaxRowValues). Host code turns false into an error naming the format (src/formats does).
KVPLAN_HD inline bool row_geometry(uint16_t id, int row_values, int group_size, RowFormat* out);

KVPLAN_HD inline bool make_row_format(uint16_t id, int row_values, int group_size, RowFormat* out) {
  if (row_values > kMaxRowValues) return false;
  return row_geometry(id, row_values, group_size, out);
}

// The geometry and byte size of a packed row of any length — the one place row sizes are computed;
// src/formats' packed_row_bytes returns its row_bytes (and turns false into an error message).
KVPLAN_HD inline bool row_geometry(uint16_t id, int row_values, int group_size, RowFormat* out) {
  if (row_values <= 0) return false;
  id = row_layout_id(id);
  const KvFormatTraits t = kv_format_traits(id);
  RowFormat f;
  f.id = id;
  f.row_values = row_values;
  switch (t.unit) {
    case RowUnit::kValue:
      if (t.codec == Codec::kNone) return false;
      f.unit_values = row_values < kPlainUnitValues ? row_values : kPlainUnitValues;
      f.unit_bytes = f.unit_values * t.unit_bytes;
      f.row_bytes = row_values * t.unit_bytes;
      break;
    case RowUnit::kIntGroup: {
      const int bits = codec_traits(t.codec).int_bits;
      if (t.unit_values > 0) group_size = t.unit_values;
      if (group_size <= 0) return false;
      f.unit_values = group_size < row_values ? group_size : row_values;
      f.unit_bytes = static_cast<int>(int_group_bytes(static_cast<size_t>(f.unit_values), bits));
      const int tail = row_values % f.unit_values;
      f.row_bytes =
          row_values / f.unit_values * f.unit_bytes +
          (tail > 0 ? static_cast<int>(int_group_bytes(static_cast<size_t>(tail), bits)) : 0);
      break;
    }
    case RowUnit::kBlock:
    case RowUnit::kSplitBlock:
      if (row_values % t.unit_values != 0) return false;
      f.unit_values = t.unit_values;
      f.unit_bytes = t.unit_bytes;
      f.row_bytes = row_values / t.unit_values * t.unit_bytes;
      if (t.unit == RowUnit::kSplitBlock) {
        f.scale_offset = f.row_bytes;
        f.row_bytes += row_values / t.unit_values;  // one scale byte per block
      }
      break;
    case RowUnit::kRow:
      if (row_values * t.bits % 8 != 0 || (t.bits == 3 && row_values % 8 != 0)) return false;
      if (codec_traits(t.codec).rotates &&
          (!rotated_row_fits(row_values) || row_values < codec_traits(t.codec).least_row)) {
        return false;
      }
      f.unit_values = row_values;
      f.unit_bytes = row_values * t.bits / 8 + t.unit_bytes;
      f.row_bytes = f.unit_bytes;
      break;
    case RowUnit::kRotatedSpans:
      if (row_values % t.unit_values != 0) return false;
      f.unit_values = t.unit_values;
      f.unit_bytes = t.unit_bytes;
      f.row_bytes = row_values / t.unit_values * t.unit_bytes;
      break;
    case RowUnit::kRotatedBlocks:
      if (row_values % t.unit_values != 0 || !rotated_row_fits(row_values)) {
        return false;
      }
      f.unit_values = row_values;
      f.unit_bytes = row_values / t.unit_values * t.unit_bytes;
      f.row_bytes = f.unit_bytes;
      break;
  }
  f.n_units = (row_values + f.unit_values - 1) / f.unit_values;
  *out = f;
  return true;
}

// Packs the n values `in` of one unit with codec kC into `out` (and, for split-block formats, its
// scale byte into `scale`). `tensor_scale` (> 0) is the f32 scale per (layer, head) of the formats
// that keep one (PackOptions::fp8_scale): FP8 stores x / tensor_scale, NVFP4 folds it into its
// block scales; the others ignore it. The CPU (src/formats/pack.cpp) and the GPU kernels both call
// these, so the bytes are identical.
// The rotated formats: the normalized Hadamard transform of the unit (the row, or a span of it),
// packed as blocks of the inner codec (defined below, after the codecs they call).
template <Codec kInner, size_t kBlockBytes>
KVPLAN_HD inline void quantize_rotated_row(const float* x, int n, uint8_t* out);
template <Codec kInner, size_t kBlockBytes>
KVPLAN_HD inline void dequantize_rotated_row(const uint8_t* in, int n, float* y);

template <Codec kC>
KVPLAN_HD inline void quantize_unit_as(const float* in, int n, uint8_t* out, uint8_t* scale,
                                       float tensor_scale) {
  (void)n;
  (void)scale;
  (void)tensor_scale;
  if constexpr (kC == Codec::kF32) {
    for (int i = 0; i < n; ++i) store_u32_le(out + 4 * i, f32_bits(in[i]));
  } else if constexpr (kC == Codec::kF16) {
    for (int i = 0; i < n; ++i) store_u16_le(out + 2 * i, f32_to_f16(in[i]));
  } else if constexpr (kC == Codec::kBF16) {
    for (int i = 0; i < n; ++i) store_u16_le(out + 2 * i, f32_to_bf16(in[i]));
  } else if constexpr (kC == Codec::kInt8) {
    quantize_group_int<8>(in, n, out);
  } else if constexpr (kC == Codec::kInt4) {
    quantize_group_int<4>(in, n, out);
  } else if constexpr (kC == Codec::kInt2) {
    quantize_group_int<2>(in, n, out);
  } else if constexpr (kC == Codec::kQ8_0) {
    quantize_block_q8_0(in, out);
  } else if constexpr (kC == Codec::kQ4_0) {
    quantize_block_q4_0(in, out);
  } else if constexpr (kC == Codec::kQ4_1) {
    quantize_block_q4_1(in, out);
  } else if constexpr (kC == Codec::kQ5_0) {
    quantize_block_q5_0(in, out);
  } else if constexpr (kC == Codec::kQ5_1) {
    quantize_block_q5_1(in, out);
  } else if constexpr (kC == Codec::kQ6_0) {
    quantize_block_q6_0(in, out);
  } else if constexpr (kC == Codec::kIq4Nl) {
    quantize_block_iq4_nl(in, out);
  } else if constexpr (kC == Codec::kFp8E4M3) {
    for (int i = 0; i < n; ++i) out[i] = f32_to_fp8_e4m3(in[i] / tensor_scale);
  } else if constexpr (kC == Codec::kFp8E5M2) {
    for (int i = 0; i < n; ++i) out[i] = f32_to_fp8_e5m2(in[i] / tensor_scale);
  } else if constexpr (kC == Codec::kMxfp4) {
    quantize_block_mxfp4(in, out);
  } else if constexpr (kC == Codec::kMxfp6E2M3) {
    quantize_block_mxfp6_e2m3(in, out);
  } else if constexpr (kC == Codec::kMxfp8E4M3) {
    quantize_block_mxfp8_e4m3(in, out);
  } else if constexpr (kC == Codec::kNvfp4) {
    quantize_group_nvfp4(in, tensor_scale, out, scale);
  } else if constexpr (kC == Codec::kFp8E4M3PerTokenHead) {
    quantize_row_fp8_per_token_head(in, n, out);
  } else if constexpr (kC == Codec::kInt8PerTokenHead) {
    quantize_row_int8_per_token_head(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ8_0) {
    quantize_rotated_row<Codec::kQ8_0, sizeof(BlockQ8_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ4_0) {
    quantize_rotated_row<Codec::kQ4_0, sizeof(BlockQ4_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardIq4Nl) {
    quantize_rotated_row<Codec::kIq4Nl, sizeof(BlockIq4Nl)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ4_1) {
    quantize_rotated_row<Codec::kQ4_1, sizeof(BlockQ4_1)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ5_0) {
    quantize_rotated_row<Codec::kQ5_0, sizeof(BlockQ5_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ5_1) {
    quantize_rotated_row<Codec::kQ5_1, sizeof(BlockQ5_1)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ6_0) {
    quantize_rotated_row<Codec::kQ6_0, sizeof(BlockQ6_0)>(in, n, out);
  } else if constexpr (kC == Codec::kTqFp8) {
    for (int i = 0; i < n; ++i) out[i] = f32_to_fp8_e4m3(in[i]);
  } else if constexpr (kC == Codec::kTqMse3) {
    quantize_row_tq_mse<3>(in, n, out);
  } else if constexpr (kC == Codec::kTqMse4) {
    quantize_row_tq_mse<4>(in, n, out);
  } else if constexpr (kC == Codec::kTqInt3) {
    quantize_row_tq_int<3>(in, n, out);
  } else if constexpr (kC == Codec::kTqInt4) {
    quantize_row_tq_int<4>(in, n, out);
  } else if constexpr (kC == Codec::kInt4PerTokenHead) {
    quantize_row_int4_per_token_head(in, n, out);
  }
}

// Unpacks one unit of n values; `tensor_scale` as in quantize_unit_as.
template <Codec kC>
KVPLAN_HD inline void dequantize_unit_as(const uint8_t* in, const uint8_t* scale, int n, float* out,
                                         float tensor_scale) {
  (void)n;
  (void)scale;
  (void)tensor_scale;
  if constexpr (kC == Codec::kF32) {
    for (int i = 0; i < n; ++i) out[i] = f32_from_bits(load_u32_le(in + 4 * i));
  } else if constexpr (kC == Codec::kF16) {
    for (int i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16_le(in + 2 * i));
  } else if constexpr (kC == Codec::kBF16) {
    for (int i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16_le(in + 2 * i));
  } else if constexpr (kC == Codec::kInt8) {
    dequantize_group_int<8>(in, n, out);
  } else if constexpr (kC == Codec::kInt4) {
    dequantize_group_int<4>(in, n, out);
  } else if constexpr (kC == Codec::kInt2) {
    dequantize_group_int<2>(in, n, out);
  } else if constexpr (kC == Codec::kQ8_0) {
    dequantize_block_q8_0(in, out);
  } else if constexpr (kC == Codec::kQ4_0) {
    dequantize_block_q4_0(in, out);
  } else if constexpr (kC == Codec::kQ4_1) {
    dequantize_block_q4_1(in, out);
  } else if constexpr (kC == Codec::kQ5_0) {
    dequantize_block_q5_0(in, out);
  } else if constexpr (kC == Codec::kQ5_1) {
    dequantize_block_q5_1(in, out);
  } else if constexpr (kC == Codec::kQ6_0) {
    dequantize_block_q6_0(in, out);
  } else if constexpr (kC == Codec::kIq4Nl) {
    dequantize_block_iq4_nl(in, out);
  } else if constexpr (kC == Codec::kFp8E4M3) {
    for (int i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(in[i]) * tensor_scale;
  } else if constexpr (kC == Codec::kFp8E5M2) {
    for (int i = 0; i < n; ++i) out[i] = fp8_e5m2_to_f32(in[i]) * tensor_scale;
  } else if constexpr (kC == Codec::kMxfp4) {
    dequantize_block_mxfp4(in, out);
  } else if constexpr (kC == Codec::kMxfp6E2M3) {
    dequantize_block_mxfp6_e2m3(in, out);
  } else if constexpr (kC == Codec::kMxfp8E4M3) {
    dequantize_block_mxfp8_e4m3(in, out);
  } else if constexpr (kC == Codec::kNvfp4) {
    dequantize_group_nvfp4(in, *scale, tensor_scale, out);
  } else if constexpr (kC == Codec::kFp8E4M3PerTokenHead) {
    dequantize_row_fp8_per_token_head(in, n, out);
  } else if constexpr (kC == Codec::kInt8PerTokenHead) {
    dequantize_row_int8_per_token_head(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ8_0) {
    dequantize_rotated_row<Codec::kQ8_0, sizeof(BlockQ8_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ4_0) {
    dequantize_rotated_row<Codec::kQ4_0, sizeof(BlockQ4_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardIq4Nl) {
    dequantize_rotated_row<Codec::kIq4Nl, sizeof(BlockIq4Nl)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ4_1) {
    dequantize_rotated_row<Codec::kQ4_1, sizeof(BlockQ4_1)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ5_0) {
    dequantize_rotated_row<Codec::kQ5_0, sizeof(BlockQ5_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ5_1) {
    dequantize_rotated_row<Codec::kQ5_1, sizeof(BlockQ5_1)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ6_0) {
    dequantize_rotated_row<Codec::kQ6_0, sizeof(BlockQ6_0)>(in, n, out);
  } else if constexpr (kC == Codec::kTqFp8) {
    for (int i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(in[i]);
  } else if constexpr (kC == Codec::kTqMse3) {
    dequantize_row_tq_mse<3>(in, n, out);
  } else if constexpr (kC == Codec::kTqMse4) {
    dequantize_row_tq_mse<4>(in, n, out);
  } else if constexpr (kC == Codec::kTqInt3) {
    dequantize_row_tq_int<3>(in, n, out);
  } else if constexpr (kC == Codec::kTqInt4) {
    dequantize_row_tq_int<4>(in, n, out);
  } else if constexpr (kC == Codec::kInt4PerTokenHead) {
    dequantize_row_int4_per_token_head(in, n, out);
  }
}

template <Codec kInner, size_t kBlockBytes>
KVPLAN_HD inline void quantize_rotated_row(const float* x, int n, uint8_t* out) {
  float rotated[kMaxRotatedRow];
  for (int i = 0; i < n; ++i) rotated[i] = x[i];
  hadamard_transform(rotated, n);
  for (int b = 0; b < n / kGgmlBlock; ++b) {
    quantize_unit_as<kInner>(rotated + b * kGgmlBlock, kGgmlBlock, out + b * kBlockBytes, nullptr,
                             1.0f);
  }
}
// The row's values in the rotated domain (its blocks unpacked, not yet rotated back).
template <Codec kInner, size_t kBlockBytes>
KVPLAN_HD inline void dequantize_rotated_blocks(const uint8_t* in, int n, float* y) {
  for (int b = 0; b < n / kGgmlBlock; ++b) {
    dequantize_unit_as<kInner>(in + b * kBlockBytes, nullptr, kGgmlBlock, y + b * kGgmlBlock, 1.0f);
  }
}
template <Codec kInner, size_t kBlockBytes>
KVPLAN_HD inline void dequantize_rotated_row(const uint8_t* in, int n, float* y) {
  dequantize_rotated_blocks<kInner, kBlockBytes>(in, n, y);
  hadamard_transform(y, n);
}
// dequantize_rotated_row of kLanes rows (in[l] -> y[l]): the same bits, the rotation of all of
// them at once in vector lanes (hadamard_transform_lanes). CPU only.
template <Codec kInner, size_t kBlockBytes, int kLanes>
inline void dequantize_rotated_rows_lanes(const uint8_t* const* in, int n, float* const* y) {
  float x[kMaxRotatedRow * kLanes];
  for (int l = 0; l < kLanes; ++l) {
    for (int b = 0; b < n / kGgmlBlock; ++b) {
      dequantize_unit_as<kInner>(in[l] + b * kBlockBytes, nullptr, kGgmlBlock,
                                 y[l] + b * kGgmlBlock, 1.0f);
    }
    for (int i = 0; i < n; ++i) x[i * kLanes + l] = y[l][i];
  }
  hadamard_transform_lanes<kLanes>(x, n, y);
}

// The codecs whose dequantization ends with the normalized Hadamard transform of the unit (the
// whole row, or a span of it, unrotated): a reader may take their values in the rotated domain
// (dequantize_unit_rotated_as) and rotate its own operand instead. Attention does: it rotates a
// block's queries once and the weighted sum of values once, instead of every key and value row it
// reads (q . H y = Hq . y and sum w H y = H sum w y, H orthonormal and symmetric).
template <Codec kC>
inline constexpr bool kHasRotatedDomain =
    kC == Codec::kHadamardQ8_0 || kC == Codec::kHadamardQ4_0 || kC == Codec::kHadamardIq4Nl ||
    kC == Codec::kHadamardQ4_1 || kC == Codec::kHadamardQ5_0 || kC == Codec::kHadamardQ5_1 ||
    kC == Codec::kHadamardQ6_0 || kC == Codec::kTqMse3 || kC == Codec::kTqMse4;

// Whether dequantize_units_in_lanes has a lane form of codec kC: the same rotated row codecs, whose
// per-row rotation (and TurboQuant's norm) is a dependent chain that one row alone cannot spread
// over a vector register.
template <Codec kC>
inline constexpr bool kHasLaneDequant = kHasRotatedDomain<kC>;

// dequantize_unit_as<kC> of kLanes units of n values (in[l] -> out[l]), bit for bit. CPU only.
template <Codec kC, int kLanes>
inline void dequantize_units_in_lanes(const uint8_t* const* in, int n, float* const* out) {
  if constexpr (kC == Codec::kHadamardQ8_0) {
    dequantize_rotated_rows_lanes<Codec::kQ8_0, sizeof(BlockQ8_0), kLanes>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ4_0) {
    dequantize_rotated_rows_lanes<Codec::kQ4_0, sizeof(BlockQ4_0), kLanes>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardIq4Nl) {
    dequantize_rotated_rows_lanes<Codec::kIq4Nl, sizeof(BlockIq4Nl), kLanes>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ4_1) {
    dequantize_rotated_rows_lanes<Codec::kQ4_1, sizeof(BlockQ4_1), kLanes>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ5_0) {
    dequantize_rotated_rows_lanes<Codec::kQ5_0, sizeof(BlockQ5_0), kLanes>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ5_1) {
    dequantize_rotated_rows_lanes<Codec::kQ5_1, sizeof(BlockQ5_1), kLanes>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ6_0) {
    dequantize_rotated_rows_lanes<Codec::kQ6_0, sizeof(BlockQ6_0), kLanes>(in, n, out);
  } else if constexpr (kC == Codec::kTqMse3) {
    dequantize_rows_tq_mse_lanes<3, kLanes>(in, n, out);
  } else if constexpr (kC == Codec::kTqMse4) {
    dequantize_rows_tq_mse_lanes<4, kLanes>(in, n, out);
  } else {
    static_assert(kC != kC, "a codec listed in kHasLaneDequant needs its lane form here");
  }
}

// One unit of codec kC (kHasRotatedDomain) in the rotated domain: dequantize_unit_as without the
// final Hadamard transform, so hadamard_transform(out, n) gives dequantize_unit_as's bits.
template <Codec kC>
KVPLAN_HD inline void dequantize_unit_rotated_as(const uint8_t* in, int n, float* out) {
  if constexpr (kC == Codec::kHadamardQ8_0) {
    dequantize_rotated_blocks<Codec::kQ8_0, sizeof(BlockQ8_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ4_0) {
    dequantize_rotated_blocks<Codec::kQ4_0, sizeof(BlockQ4_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardIq4Nl) {
    dequantize_rotated_blocks<Codec::kIq4Nl, sizeof(BlockIq4Nl)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ4_1) {
    dequantize_rotated_blocks<Codec::kQ4_1, sizeof(BlockQ4_1)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ5_0) {
    dequantize_rotated_blocks<Codec::kQ5_0, sizeof(BlockQ5_0)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ5_1) {
    dequantize_rotated_blocks<Codec::kQ5_1, sizeof(BlockQ5_1)>(in, n, out);
  } else if constexpr (kC == Codec::kHadamardQ6_0) {
    dequantize_rotated_blocks<Codec::kQ6_0, sizeof(BlockQ6_0)>(in, n, out);
  } else if constexpr (kC == Codec::kTqMse3) {
    dequantize_row_tq_mse_rotated<3>(in, n, out);
  } else if constexpr (kC == Codec::kTqMse4) {
    dequantize_row_tq_mse_rotated<4>(in, n, out);
  } else {
    static_assert(kC != kC, "a codec listed in kHasRotatedDomain needs its rotated form here");
  }
}
// dequantize_unit_rotated_as of kLanes units (in[l] -> out[l]), bit for bit: TurboQuant's norm sums
// side by side in vector lanes; the Hadamard codecs' blocks have no chain to spread. CPU only.
template <Codec kC, int kLanes>
inline void dequantize_units_rotated_in_lanes(const uint8_t* const* in, int n, float* const* out) {
  if constexpr (kC == Codec::kTqMse3) {
    dequantize_rows_tq_mse_lanes<3, kLanes, false>(in, n, out);
  } else if constexpr (kC == Codec::kTqMse4) {
    dequantize_rows_tq_mse_lanes<4, kLanes, false>(in, n, out);
  } else {
    for (int l = 0; l < kLanes; ++l) dequantize_unit_rotated_as<kC>(in[l], n, out[l]);
  }
}

template <Codec kC>
struct CodecTag {
  static constexpr Codec value = kC;
};

// The one dispatch from a runtime codec to its math: calls fn(CodecTag<c>{}), so a loop over many
// units inside fn pays for the switch once.
template <typename Fn>
KVPLAN_HD inline void with_codec(Codec c, Fn&& fn) {
  switch (c) {
    case Codec::kF32:
      return fn(CodecTag<Codec::kF32>{});
    case Codec::kF16:
      return fn(CodecTag<Codec::kF16>{});
    case Codec::kBF16:
      return fn(CodecTag<Codec::kBF16>{});
    case Codec::kInt8:
      return fn(CodecTag<Codec::kInt8>{});
    case Codec::kInt4:
      return fn(CodecTag<Codec::kInt4>{});
    case Codec::kInt2:
      return fn(CodecTag<Codec::kInt2>{});
    case Codec::kQ8_0:
      return fn(CodecTag<Codec::kQ8_0>{});
    case Codec::kQ4_0:
      return fn(CodecTag<Codec::kQ4_0>{});
    case Codec::kQ4_1:
      return fn(CodecTag<Codec::kQ4_1>{});
    case Codec::kQ5_0:
      return fn(CodecTag<Codec::kQ5_0>{});
    case Codec::kQ5_1:
      return fn(CodecTag<Codec::kQ5_1>{});
    case Codec::kIq4Nl:
      return fn(CodecTag<Codec::kIq4Nl>{});
    case Codec::kFp8E4M3:
      return fn(CodecTag<Codec::kFp8E4M3>{});
    case Codec::kFp8E5M2:
      return fn(CodecTag<Codec::kFp8E5M2>{});
    case Codec::kMxfp4:
      return fn(CodecTag<Codec::kMxfp4>{});
    case Codec::kMxfp6E2M3:
      return fn(CodecTag<Codec::kMxfp6E2M3>{});
    case Codec::kMxfp8E4M3:
      return fn(CodecTag<Codec::kMxfp8E4M3>{});
    case Codec::kNvfp4:
      return fn(CodecTag<Codec::kNvfp4>{});
    case Codec::kFp8E4M3PerTokenHead:
      return fn(CodecTag<Codec::kFp8E4M3PerTokenHead>{});
    case Codec::kInt8PerTokenHead:
      return fn(CodecTag<Codec::kInt8PerTokenHead>{});
    case Codec::kHadamardQ8_0:
      return fn(CodecTag<Codec::kHadamardQ8_0>{});
    case Codec::kHadamardQ4_0:
      return fn(CodecTag<Codec::kHadamardQ4_0>{});
    case Codec::kHadamardIq4Nl:
      return fn(CodecTag<Codec::kHadamardIq4Nl>{});
    case Codec::kHadamardQ4_1:
      return fn(CodecTag<Codec::kHadamardQ4_1>{});
    case Codec::kHadamardQ5_0:
      return fn(CodecTag<Codec::kHadamardQ5_0>{});
    case Codec::kHadamardQ5_1:
      return fn(CodecTag<Codec::kHadamardQ5_1>{});
    case Codec::kQ6_0:
      return fn(CodecTag<Codec::kQ6_0>{});
    case Codec::kHadamardQ6_0:
      return fn(CodecTag<Codec::kHadamardQ6_0>{});
    case Codec::kTqFp8:
      return fn(CodecTag<Codec::kTqFp8>{});
    case Codec::kTqMse3:
      return fn(CodecTag<Codec::kTqMse3>{});
    case Codec::kTqMse4:
      return fn(CodecTag<Codec::kTqMse4>{});
    case Codec::kTqInt3:
      return fn(CodecTag<Codec::kTqInt3>{});
    case Codec::kTqInt4:
      return fn(CodecTag<Codec::kTqInt4>{});
    case Codec::kInt4PerTokenHead:
      return fn(CodecTag<Codec::kInt4PerTokenHead>{});
    case Codec::kNone:
      return;  // make_row_format refused it
  }
}

KVPLAN_HD inline void quantize_codec_unit(Codec c, const float* in, int n, uint8_t* out,
                                          uint8_t* scale, float tensor_scale) {
  with_codec(c, [&](auto tag) {
    quantize_unit_as<decltype(tag)::value>(in, n, out, scale, tensor_scale);
  });
}
KVPLAN_HD inline void dequantize_codec_unit(Codec c, const uint8_t* in, const uint8_t* scale, int n,
                                            float* out, float tensor_scale) {
  with_codec(c, [&](auto tag) {
    dequantize_unit_as<decltype(tag)::value>(in, scale, n, out, tensor_scale);
  });
}

// Unit u of the row x [row_values] into row [row_bytes], and back. quantize_row_unit_values takes
// the unit's own values (x_unit = x + u * unit_values), for callers that gather them first.
KVPLAN_HD inline void quantize_row_unit_values(const RowFormat& f, const float* x_unit, int u,
                                               uint8_t* row, float tensor_scale) {
  quantize_codec_unit(kv_format_traits(f.id).codec, x_unit, row_unit_values(f, u),
                      row + u * f.unit_bytes, row + f.scale_offset + u, tensor_scale);
}
KVPLAN_HD inline void quantize_row_unit(const RowFormat& f, const float* x, int u, uint8_t* row,
                                        float tensor_scale) {
  quantize_row_unit_values(f, x + u * f.unit_values, u, row, tensor_scale);
}
KVPLAN_HD inline void dequantize_row_unit(const RowFormat& f, const uint8_t* row, int u, float* y,
                                          float tensor_scale) {
  dequantize_codec_unit(kv_format_traits(f.id).codec, row + u * f.unit_bytes,
                        row + f.scale_offset + u, row_unit_values(f, u), y + u * f.unit_values,
                        tensor_scale);
}

}  // namespace kvplan
