// A packed row's geometry and the per-unit pack/unpack dispatch shared by the GPU kernels and their
// CPU reference paths. A row (head_dim values of one token and KV head) is a sequence of "units"
// packed independently: a ggml block (32 values), a uniform-int group (group_size clamped to the
// row; the last one may be shorter), or 32 values of a plain/FP8 format. Unit u starts at value
// u * unit_values and byte u * unit_bytes, so a thread can pack or unpack any unit on its own.
//
// The numeric format ids are FormatId's (src/formats/format.h), repeated here because device code
// cannot include that header; tests/gpu checks the two lists and the sizes agree.
//
//   kvplan::RowFormat f;
//   if (kvplan::make_row_format(kvplan::kFmtQ4_0, 128, 32, &f)) { /* f.row_bytes == 72 */ }
//   for (int u = 0; u < f.n_units; ++u) kvplan::quantize_row_unit(f, x, u, row, 1.0f);
#pragma once

#include <cstdint>

#include "kernels/float_convert.h"
#include "kernels/kv_blocks.h"
#include "kernels/kv_format_math.h"
#include "kernels/kvplan_hd.h"

namespace kvplan {

// FormatId values (src/formats/format.h): never renumber.
inline constexpr uint16_t kFmtF32 = 1, kFmtF16 = 2, kFmtBF16 = 3;
inline constexpr uint16_t kFmtInt8 = 16, kFmtInt4 = 17, kFmtInt2 = 18;
// The int formats with a fixed group (64 or 128 values) instead of the plan's group_size.
inline constexpr uint16_t kFmtInt8G64 = 19, kFmtInt8G128 = 20, kFmtInt4G64 = 21, kFmtInt4G128 = 22,
                          kFmtInt2G64 = 23, kFmtInt2G128 = 24;
// KIVI keys: int8/int4/int2 packed per channel over groups of group_size tokens. Each channel's
// group is an int row of group_size values, so their row layout is the plain int one.
inline constexpr uint16_t kFmtInt8Kivi = 25, kFmtInt4Kivi = 26, kFmtInt2Kivi = 27;

// The id whose row layout `id` packs with (a KIVI key format's int format; itself otherwise).
KVPLAN_HD inline uint16_t row_layout_id(uint16_t id) {
  switch (id) {
    case kFmtInt8Kivi:
      return kFmtInt8;
    case kFmtInt4Kivi:
      return kFmtInt4;
    case kFmtInt2Kivi:
      return kFmtInt2;
    default:
      return id;
  }
}

// Bits of a uniform-int format and the group it fixes (0: the caller's group_size); false for
// other ids.
KVPLAN_HD inline bool uniform_int_format(uint16_t id, int* bits, int* fixed_group) {
  switch (row_layout_id(id)) {
    case kFmtInt8:
      *bits = 8;
      *fixed_group = 0;
      return true;
    case kFmtInt4:
      *bits = 4;
      *fixed_group = 0;
      return true;
    case kFmtInt2:
      *bits = 2;
      *fixed_group = 0;
      return true;
    case kFmtInt8G64:
      *bits = 8;
      *fixed_group = 64;
      return true;
    case kFmtInt8G128:
      *bits = 8;
      *fixed_group = 128;
      return true;
    case kFmtInt4G64:
      *bits = 4;
      *fixed_group = 64;
      return true;
    case kFmtInt4G128:
      *bits = 4;
      *fixed_group = 128;
      return true;
    case kFmtInt2G64:
      *bits = 2;
      *fixed_group = 64;
      return true;
    case kFmtInt2G128:
      *bits = 2;
      *fixed_group = 128;
      return true;
    default:
      return false;
  }
}
inline constexpr uint16_t kFmtQ8_0 = 32, kFmtQ4_0 = 33, kFmtQ4_1 = 34, kFmtQ5_0 = 35, kFmtQ5_1 = 36,
                          kFmtIq4Nl = 37;
inline constexpr uint16_t kFmtFp8E4M3 = 48, kFmtFp8E5M2 = 49;

// Rows longer than this are refused by make_row_format (device code keeps a unit in registers or
// local memory, and int groups may span the whole row).
inline constexpr int kMaxRowValues = 512;
// Values per unit of the plain and FP8 formats (one thread's share of a row).
inline constexpr int kPlainUnitValues = 32;

struct RowFormat {
  uint16_t id = 0;      // FormatId value
  int row_values = 0;   // head_dim
  int unit_values = 0;  // values per full unit
  int unit_bytes = 0;   // bytes per full unit
  int n_units = 0;      // ceil(row_values / unit_values)
  int row_bytes = 0;    // equals packed_row_bytes(format, row_values, group_size)
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
  RowFormat f;
  f.id = id;
  f.row_values = row_values;
  int value_bytes = 0;  // plain and fp8
  int int_bits = 0;
  int block_bytes = 0;
  int fixed_group = 0;
  if (uniform_int_format(id, &int_bits, &fixed_group) && fixed_group > 0) group_size = fixed_group;
  switch (id) {
    case kFmtF32:
      value_bytes = 4;
      break;
    case kFmtF16:
    case kFmtBF16:
      value_bytes = 2;
      break;
    case kFmtFp8E4M3:
    case kFmtFp8E5M2:
      value_bytes = 1;
      break;
    case kFmtInt8:
    case kFmtInt4:
    case kFmtInt2:
    case kFmtInt8G64:
    case kFmtInt8G128:
    case kFmtInt4G64:
    case kFmtInt4G128:
    case kFmtInt2G64:
    case kFmtInt2G128:
      break;  // int_bits set above
    case kFmtQ8_0:
      block_bytes = static_cast<int>(sizeof(BlockQ8_0));
      break;
    case kFmtQ4_0:
      block_bytes = static_cast<int>(sizeof(BlockQ4_0));
      break;
    case kFmtQ4_1:
      block_bytes = static_cast<int>(sizeof(BlockQ4_1));
      break;
    case kFmtQ5_0:
      block_bytes = static_cast<int>(sizeof(BlockQ5_0));
      break;
    case kFmtQ5_1:
      block_bytes = static_cast<int>(sizeof(BlockQ5_1));
      break;
    case kFmtIq4Nl:
      block_bytes = static_cast<int>(sizeof(BlockIq4Nl));
      break;
    default:
      return false;
  }
  if (value_bytes > 0) {
    f.unit_values = row_values < kPlainUnitValues ? row_values : kPlainUnitValues;
    f.unit_bytes = f.unit_values * value_bytes;
    f.row_bytes = row_values * value_bytes;
  } else if (int_bits > 0) {
    if (group_size <= 0) return false;
    f.unit_values = group_size < row_values ? group_size : row_values;
    f.unit_bytes = static_cast<int>(int_group_bytes(static_cast<size_t>(f.unit_values), int_bits));
    const int tail = row_values % f.unit_values;
    f.row_bytes =
        row_values / f.unit_values * f.unit_bytes +
        (tail > 0 ? static_cast<int>(int_group_bytes(static_cast<size_t>(tail), int_bits)) : 0);
  } else {
    if (row_values % kGgmlBlock != 0) return false;
    f.unit_values = kGgmlBlock;
    f.unit_bytes = block_bytes;
    f.row_bytes = row_values / kGgmlBlock * block_bytes;
  }
  f.n_units = (row_values + f.unit_values - 1) / f.unit_values;
  *out = f;
  return true;
}

// Packs the n values `in` of one unit of format `id` into `out`. `fp8_scale` (> 0) divides the
// values of FP8 formats (PackOptions::fp8_scale) and is ignored by the others. Same functions,
// same operation order as src/formats/pack.cpp, so the bytes are identical.
KVPLAN_HD inline void quantize_unit(uint16_t id, const float* in, int n, uint8_t* out,
                                    float fp8_scale) {
  switch (row_layout_id(id)) {
    case kFmtF32:
      for (int i = 0; i < n; ++i) store_u32_le(out + 4 * i, f32_bits(in[i]));
      return;
    case kFmtF16:
      for (int i = 0; i < n; ++i) store_u16_le(out + 2 * i, f32_to_f16(in[i]));
      return;
    case kFmtBF16:
      for (int i = 0; i < n; ++i) store_u16_le(out + 2 * i, f32_to_bf16(in[i]));
      return;
    case kFmtInt8:
    case kFmtInt8G64:
    case kFmtInt8G128:
      return quantize_group_int<8>(in, n, out);
    case kFmtInt4:
    case kFmtInt4G64:
    case kFmtInt4G128:
      return quantize_group_int<4>(in, n, out);
    case kFmtInt2:
    case kFmtInt2G64:
    case kFmtInt2G128:
      return quantize_group_int<2>(in, n, out);
    case kFmtQ8_0:
      return quantize_block_q8_0(in, out);
    case kFmtQ4_0:
      return quantize_block_q4_0(in, out);
    case kFmtQ4_1:
      return quantize_block_q4_1(in, out);
    case kFmtQ5_0:
      return quantize_block_q5_0(in, out);
    case kFmtQ5_1:
      return quantize_block_q5_1(in, out);
    case kFmtIq4Nl:
      return quantize_block_iq4_nl(in, out);
    case kFmtFp8E4M3:
      for (int i = 0; i < n; ++i) out[i] = f32_to_fp8_e4m3(in[i] / fp8_scale);
      return;
    case kFmtFp8E5M2:
      for (int i = 0; i < n; ++i) out[i] = f32_to_fp8_e5m2(in[i] / fp8_scale);
      return;
    default:
      return;  // make_row_format refused it
  }
}

// Unpacks one unit of n values; `fp8_scale` multiplies FP8 values.
KVPLAN_HD inline void dequantize_unit(uint16_t id, const uint8_t* in, int n, float* out,
                                      float fp8_scale) {
  switch (row_layout_id(id)) {
    case kFmtF32:
      for (int i = 0; i < n; ++i) out[i] = f32_from_bits(load_u32_le(in + 4 * i));
      return;
    case kFmtF16:
      for (int i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16_le(in + 2 * i));
      return;
    case kFmtBF16:
      for (int i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16_le(in + 2 * i));
      return;
    case kFmtInt8:
    case kFmtInt8G64:
    case kFmtInt8G128:
      return dequantize_group_int<8>(in, n, out);
    case kFmtInt4:
    case kFmtInt4G64:
    case kFmtInt4G128:
      return dequantize_group_int<4>(in, n, out);
    case kFmtInt2:
    case kFmtInt2G64:
    case kFmtInt2G128:
      return dequantize_group_int<2>(in, n, out);
    case kFmtQ8_0:
      return dequantize_block_q8_0(in, out);
    case kFmtQ4_0:
      return dequantize_block_q4_0(in, out);
    case kFmtQ4_1:
      return dequantize_block_q4_1(in, out);
    case kFmtQ5_0:
      return dequantize_block_q5_0(in, out);
    case kFmtQ5_1:
      return dequantize_block_q5_1(in, out);
    case kFmtIq4Nl:
      return dequantize_block_iq4_nl(in, out);
    case kFmtFp8E4M3:
      for (int i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(in[i]) * fp8_scale;
      return;
    case kFmtFp8E5M2:
      for (int i = 0; i < n; ++i) out[i] = fp8_e5m2_to_f32(in[i]) * fp8_scale;
      return;
    default:
      return;
  }
}

// Unit u of the row x [row_values] into row [row_bytes], and back.
KVPLAN_HD inline void quantize_row_unit(const RowFormat& f, const float* x, int u, uint8_t* row,
                                        float fp8_scale) {
  quantize_unit(f.id, x + u * f.unit_values, row_unit_values(f, u), row + u * f.unit_bytes,
                fp8_scale);
}
KVPLAN_HD inline void dequantize_row_unit(const RowFormat& f, const uint8_t* row, int u, float* y,
                                          float fp8_scale) {
  dequantize_unit(f.id, row + u * f.unit_bytes, row_unit_values(f, u), y + u * f.unit_values,
                  fp8_scale);
}

}  // namespace kvplan
