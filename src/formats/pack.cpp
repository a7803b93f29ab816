#include "formats/pack.h"

#include <vector>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/ggml_rows_avx2.h"
#include "formats/kv_row_format.h"

namespace kvplan {
namespace {

// Groups of 32 (the default) get their own inlined copy of the group code with a constant trip
// count, which the compiler vectorises fully; other sizes take the general loop.
template <int kBits>
void pack_int_row(const float* x, size_t n, size_t group, uint8_t* out) {
  if (group == 32 && n % 32 == 0) {
    for (size_t start = 0; start < n; start += 32, out += int_group_bytes(32, kBits)) {
      quantize_group_int<kBits>(x + start, 32, out);
    }
    return;
  }
  for (size_t start = 0; start < n; start += group) {
    const size_t len = n - start < group ? n - start : group;
    quantize_group_int<kBits>(x + start, static_cast<int>(len), out);
    out += int_group_bytes(len, kBits);
  }
}

template <int kBits>
void unpack_int_row(const uint8_t* in, size_t n, size_t group, float* y) {
  if (group == 32 && n % 32 == 0) {
    for (size_t start = 0; start < n; start += 32, in += int_group_bytes(32, kBits)) {
      dequantize_group_int<kBits>(in, 32, y + start);
    }
    return;
  }
  for (size_t start = 0; start < n; start += group) {
    const size_t len = n - start < group ? n - start : group;
    dequantize_group_int<kBits>(in, static_cast<int>(len), y + start);
    in += int_group_bytes(len, kBits);
  }
}

void check_sizes(Format format, size_t n_values, size_t n_bytes, size_t group_size) {
  const size_t expected = packed_row_bytes(format, n_values, group_size);
  if (n_bytes != expected) {
    fail(ErrorCode::kInvalidArgument, "format {}: a row of {} values packs into {} bytes, got {}",
         format.name(), n_values, expected, n_bytes);
  }
}

void check_fp8_scale(Format format, float scale) {
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    fail(ErrorCode::kInvalidArgument, "format {}: scale must be finite and > 0, got {}",
         format.name(), scale);
  }
}

// One unit, out of line: inlined into the row loops, the block quantizers compile to slower code
// (q4_0: about a third slower to pack and unpack, kvplan_bench_formats).
template <Codec kC>
[[gnu::noinline]] void quantize_unit_out_of_line(const float* in, int n, uint8_t* out,
                                                 uint8_t* scale, float tensor_scale) {
  quantize_unit_as<kC>(in, n, out, scale, tensor_scale);
}
template <Codec kC>
[[gnu::noinline]] void dequantize_unit_out_of_line(const uint8_t* in, const uint8_t* scale, int n,
                                                   float* out, float tensor_scale) {
  dequantize_unit_as<kC>(in, scale, n, out, tensor_scale);
}

// The row geometry of a format whose sizes the caller has validated.
RowFormat row_format(Format format, size_t n, size_t group) {
  RowFormat f;
  if (!row_geometry(static_cast<uint16_t>(format.id()), static_cast<int>(n),
                    static_cast<int>(group), &f)) {
    fail(ErrorCode::kInternal, "format {} has no row layout for {} values", format.name(), n);
  }
  return f;
}

// Packs rows whose sizes the caller has validated (row_bytes = packed_row_bytes(format, n, group)).
// The codec is dispatched once per call: each codec gets its own row loop over the math the GPU
// kernels use (src/formats/kv_row_format.h). f32 rows are their bytes, per-value codecs take a row
// as one unit, int rows take the group loops above, and block codecs go block by block.
void pack_rows_unchecked(Format format, const float* x, size_t x_stride, size_t n_rows, size_t n,
                         uint8_t* dst, size_t dst_stride, const PackOptions& options) {
  const RowFormat f = row_format(format, n, options.group_size);
  const size_t group = static_cast<size_t>(f.unit_values);
  with_codec(format.info().codec, [&](auto tag) {
    constexpr Codec kC = decltype(tag)::value;
    for (size_t r = 0; r < n_rows; ++r) {
      const float* in = x + r * x_stride;
      uint8_t* out = dst + r * dst_stride;
      if constexpr (kC == Codec::kF32) {
        std::memcpy(out, in, n * sizeof(float));
      } else if constexpr (codec_traits(kC).per_value) {
        quantize_unit_as<kC>(in, static_cast<int>(n), out, nullptr, options.fp8_scale);
      } else if constexpr (codec_traits(kC).int_bits > 0) {
        pack_int_row<codec_traits(kC).int_bits>(in, n, group, out);
      } else {
        for (int u = 0; u < f.n_units; ++u) {
          quantize_unit_out_of_line<kC>(in + u * f.unit_values, row_unit_values(f, u),
                                        out + u * f.unit_bytes, out + f.scale_offset + u,
                                        options.fp8_scale);
        }
      }
    }
  });
}

// Rows per call of dequantize_units_in_lanes: one per f32 lane of an AVX2 register.
constexpr int kLanes = 8;

// Unit u of kLanes consecutive rows, through the lane form of codec kC (the same bits).
template <Codec kC>
[[gnu::noinline]] void dequantize_unit_of_rows_in_lanes(const RowFormat& f, int u,
                                                        const uint8_t* src, size_t src_stride,
                                                        float* y, size_t y_stride,
                                                        bool rotated_domain) {
  const uint8_t* in[kLanes];
  float* out[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    in[l] = src + static_cast<size_t>(l) * src_stride + static_cast<size_t>(u * f.unit_bytes);
    out[l] = y + static_cast<size_t>(l) * y_stride + static_cast<size_t>(u * f.unit_values);
  }
  if (rotated_domain) {
    dequantize_units_rotated_in_lanes<kC, kLanes>(in, row_unit_values(f, u), out);
  } else {
    dequantize_units_in_lanes<kC, kLanes>(in, row_unit_values(f, u), out);
  }
}

void unpack_rows_unchecked(Format format, const uint8_t* src, size_t src_stride, size_t n_rows,
                           size_t n, float* y, size_t y_stride, const PackOptions& options) {
  const RowFormat f = row_format(format, n, options.group_size);
  const size_t group = static_cast<size_t>(f.unit_values);
  with_codec(format.info().codec, [&](auto tag) {
    constexpr Codec kC = decltype(tag)::value;
    [[maybe_unused]] const bool rotated = kHasRotatedDomain<kC> && options.rotated_domain;
    size_t r = 0;
    if constexpr (kHasLaneDequant<kC>) {
      for (; r + kLanes <= n_rows; r += kLanes) {
        for (int u = 0; u < f.n_units; ++u) {
          dequantize_unit_of_rows_in_lanes<kC>(f, u, src + r * src_stride, src_stride,
                                               y + r * y_stride, y_stride, rotated);
        }
      }
    }
    for (; r < n_rows; ++r) {
      const uint8_t* in = src + r * src_stride;
      float* out = y + r * y_stride;
      if constexpr (kC == Codec::kF32) {
        std::memcpy(out, in, n * sizeof(float));
#if defined(KVPLAN_HAVE_AVX2_ROWS)
      } else if constexpr (kC == Codec::kF16) {
        f16_to_f32_avx2(in, n, out);
      } else if constexpr (kC == Codec::kBF16) {
        bf16_to_f32_avx2(in, n, out);
      } else if constexpr (kC == Codec::kQ4_0) {
        dequantize_q4_0_blocks_avx2(in, static_cast<size_t>(f.n_units), out);
      } else if constexpr (kC == Codec::kQ4_1) {
        dequantize_q4_1_blocks_avx2(in, static_cast<size_t>(f.n_units), out);
      } else if constexpr (kC == Codec::kQ8_0) {
        dequantize_q8_0_blocks_avx2(in, static_cast<size_t>(f.n_units), out);
#endif
      } else if constexpr (codec_traits(kC).per_value) {
        dequantize_unit_as<kC>(in, nullptr, static_cast<int>(n), out, options.fp8_scale);
      } else if constexpr (codec_traits(kC).int_bits > 0) {
        unpack_int_row<codec_traits(kC).int_bits>(in, n, group, out);
      } else if constexpr (kHasRotatedDomain<kC>) {
        for (int u = 0; u < f.n_units; ++u) {
          if (rotated) {
            dequantize_unit_rotated_as<kC>(in + u * f.unit_bytes, row_unit_values(f, u),
                                           out + u * f.unit_values);
          } else {
            dequantize_unit_out_of_line<kC>(in + u * f.unit_bytes, in + f.scale_offset + u,
                                            row_unit_values(f, u), out + u * f.unit_values,
                                            options.fp8_scale);
          }
        }
      } else {
        for (int u = 0; u < f.n_units; ++u) {
          dequantize_unit_out_of_line<kC>(in + u * f.unit_bytes, in + f.scale_offset + u,
                                          row_unit_values(f, u), out + u * f.unit_values,
                                          options.fp8_scale);
        }
      }
    }
  });
}

}  // namespace

int rotation_span(Format format, size_t row_len) {
  bool has_domain = false;
  with_codec(format.info().codec,
             [&](auto tag) { has_domain = kHasRotatedDomain<decltype(tag)::value>; });
  if (!has_domain) return 0;
  const RowFormat f = row_format(format, row_len, row_len);
  return f.unit_values;
}

void pack_row(Format format, std::span<const float> values, std::span<uint8_t> out,
              const PackOptions& options) {
  check_sizes(format, values.size(), out.size(), options.group_size);
  if (format.has_tensor_scale()) check_fp8_scale(format, options.fp8_scale);
  pack_rows_unchecked(format, values.data(), values.size(), 1, values.size(), out.data(),
                      out.size(), options);
}

void unpack_row(Format format, std::span<const uint8_t> packed, std::span<float> values,
                const PackOptions& options) {
  check_sizes(format, values.size(), packed.size(), options.group_size);
  if (format.has_tensor_scale()) check_fp8_scale(format, options.fp8_scale);
  unpack_rows_unchecked(format, packed.data(), packed.size(), 1, values.size(), values.data(),
                        values.size(), options);
}

void pack_rows(Format format, const float* values, size_t n_rows, size_t row_len, uint8_t* out,
               const PackOptions& options) {
  const size_t row_bytes = packed_row_bytes(format, row_len, options.group_size);
  if (format.has_tensor_scale()) check_fp8_scale(format, options.fp8_scale);
  pack_rows_unchecked(format, values, row_len, n_rows, row_len, out, row_bytes, options);
}

void pack_rows_strided(Format format, const float* values, size_t value_stride, size_t n_rows,
                       size_t row_len, uint8_t* out, size_t out_stride,
                       const PackOptions& options) {
  const size_t row_bytes = packed_row_bytes(format, row_len, options.group_size);
  if (value_stride < row_len || out_stride < row_bytes) {
    fail(ErrorCode::kInvalidArgument,
         "format {}: strides {} values / {} bytes are shorter than a row ({} / {})", format.name(),
         value_stride, out_stride, row_len, row_bytes);
  }
  if (format.has_tensor_scale()) check_fp8_scale(format, options.fp8_scale);
  pack_rows_unchecked(format, values, value_stride, n_rows, row_len, out, out_stride, options);
}

void unpack_rows(Format format, const uint8_t* packed, size_t n_rows, size_t row_len, float* values,
                 const PackOptions& options) {
  const size_t row_bytes = packed_row_bytes(format, row_len, options.group_size);
  if (format.has_tensor_scale()) check_fp8_scale(format, options.fp8_scale);
  unpack_rows_unchecked(format, packed, row_bytes, n_rows, row_len, values, row_len, options);
}

void unpack_rows_strided(Format format, const uint8_t* packed, size_t packed_stride, size_t n_rows,
                         size_t row_len, float* values, size_t value_stride,
                         const PackOptions& options) {
  const size_t row_bytes = packed_row_bytes(format, row_len, options.group_size);
  if (value_stride < row_len || packed_stride < row_bytes) {
    fail(ErrorCode::kInvalidArgument,
         "format {}: strides {} bytes / {} values are shorter than a row ({} / {})", format.name(),
         packed_stride, value_stride, row_bytes, row_len);
  }
  if (format.has_tensor_scale()) check_fp8_scale(format, options.fp8_scale);
  unpack_rows_unchecked(format, packed, packed_stride, n_rows, row_len, values, value_stride,
                        options);
}

void pack_channels(Format format, const float* values, size_t n_tokens, size_t n_channels,
                   size_t token_stride, std::span<uint8_t> out, const PackOptions& options) {
  const size_t row_bytes = packed_row_bytes(format, n_tokens, n_tokens);
  if (out.size() != row_bytes * n_channels) {
    fail(ErrorCode::kInvalidArgument,
         "format {}: {} channels of {} tokens pack into {} bytes, got {}", format.name(),
         n_channels, n_tokens, row_bytes * n_channels, out.size());
  }
  PackOptions per_channel = options;
  per_channel.group_size = n_tokens;
  std::vector<float> column(n_tokens);
  for (size_t c = 0; c < n_channels; ++c) {
    for (size_t t = 0; t < n_tokens; ++t) column[t] = values[t * token_stride + c];
    pack_row(format, column, out.subspan(c * row_bytes, row_bytes), per_channel);
  }
}

void unpack_channels(Format format, std::span<const uint8_t> packed, size_t n_tokens,
                     size_t n_channels, float* values, size_t token_stride,
                     const PackOptions& options) {
  const size_t row_bytes = packed_row_bytes(format, n_tokens, n_tokens);
  if (packed.size() != row_bytes * n_channels) {
    fail(ErrorCode::kInvalidArgument,
         "format {}: {} channels of {} tokens unpack from {} bytes, got {}", format.name(),
         n_channels, n_tokens, row_bytes * n_channels, packed.size());
  }
  if (format.has_tensor_scale()) check_fp8_scale(format, options.fp8_scale);
  PackOptions per_channel = options;
  per_channel.group_size = n_tokens;
  const Codec codec = format.info().codec;
  const int int_bits = codec_traits(codec).int_bits;
  const RowFormat f = row_format(format, n_tokens, n_tokens);
  if (int_bits > 0 && f.n_units == 1 && n_channels % kLanes == 0) {
    // Integer groups (KIVI's keys): kLanes channels at a time, written straight to token rows.
    for (size_t c = 0; c < n_channels; c += kLanes) {
      const uint8_t* in[kLanes];
      for (int l = 0; l < kLanes; ++l) in[l] = packed.data() + (c + l) * row_bytes;
      const int n = static_cast<int>(n_tokens);
      if (int_bits == 8)
        dequantize_groups_int_transposed<8, kLanes>(in, n, values + c, token_stride);
      if (int_bits == 4)
        dequantize_groups_int_transposed<4, kLanes>(in, n, values + c, token_stride);
      if (int_bits == 2)
        dequantize_groups_int_transposed<2, kLanes>(in, n, values + c, token_stride);
    }
    return;
  }
  // Other formats: all channels in one call (one codec dispatch, rows in lanes), then transposed.
  std::vector<float> channels(n_channels * n_tokens);
  unpack_rows_unchecked(format, packed.data(), row_bytes, n_channels, n_tokens, channels.data(),
                        n_tokens, per_channel);
  for (size_t t = 0; t < n_tokens; ++t) {
    float* token = values + t * token_stride;
    for (size_t c = 0; c < n_channels; ++c) token[c] = channels[c * n_tokens + t];
  }
}

float fp8_scale_for_absmax(Format format, float absmax) {
  if (!(absmax > 0.0f) || !std::isfinite(absmax)) return 1.0f;
  if (!format.has_tensor_scale()) {
    fail(ErrorCode::kInvalidArgument, "format {} has no FP8 scale", format.name());
  }
  return absmax / format.info().tensor_scale_range;
}

}  // namespace kvplan
