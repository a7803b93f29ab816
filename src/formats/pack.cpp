#include "formats/pack.h"

#include <vector>

#include "core/error.h"
#include "formats/format_size.h"
#include "kernels/kv_format_math.h"

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

using BlockQuantizer = void (*)(const float*, uint8_t*);
using BlockDequantizer = void (*)(const uint8_t*, float*);

BlockQuantizer ggml_quantizer(FormatId id) {
  switch (id) {
    case FormatId::kQ8_0:
      return quantize_block_q8_0;
    case FormatId::kQ4_0:
      return quantize_block_q4_0;
    case FormatId::kQ4_1:
      return quantize_block_q4_1;
    case FormatId::kQ5_0:
      return quantize_block_q5_0;
    case FormatId::kQ5_1:
      return quantize_block_q5_1;
    case FormatId::kIq4Nl:
      return quantize_block_iq4_nl;
    default:
      fail(ErrorCode::kInternal, "not a ggml block format: {}", static_cast<int>(id));
  }
}

BlockDequantizer ggml_dequantizer(FormatId id) {
  switch (id) {
    case FormatId::kQ8_0:
      return dequantize_block_q8_0;
    case FormatId::kQ4_0:
      return dequantize_block_q4_0;
    case FormatId::kQ4_1:
      return dequantize_block_q4_1;
    case FormatId::kQ5_0:
      return dequantize_block_q5_0;
    case FormatId::kQ5_1:
      return dequantize_block_q5_1;
    case FormatId::kIq4Nl:
      return dequantize_block_iq4_nl;
    default:
      fail(ErrorCode::kInternal, "not a ggml block format: {}", static_cast<int>(id));
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

// Packs rows whose sizes the caller has validated (row_bytes = packed_row_bytes(format, n, group)).
// The format dispatch happens once per call, not once per row.
void pack_rows_unchecked(Format format, const float* x, size_t n_rows, size_t n, size_t row_bytes,
                         uint8_t* dst, const PackOptions& options) {
  const auto each_row = [&](auto&& pack_one) {
    for (size_t r = 0; r < n_rows; ++r) pack_one(x + r * n, dst + r * row_bytes);
  };
  const size_t group = effective_group_size(format, n, options.group_size);
  const float scale = options.fp8_scale;
  switch (format.id()) {
    case FormatId::kF32:
      return each_row(
          [&](const float* in, uint8_t* out) { std::memcpy(out, in, n * sizeof(float)); });
    case FormatId::kF16:
      return each_row([&](const float* in, uint8_t* out) {
        for (size_t i = 0; i < n; ++i) store_u16_le(out + 2 * i, f32_to_f16(in[i]));
      });
    case FormatId::kBF16:
      return each_row([&](const float* in, uint8_t* out) {
        for (size_t i = 0; i < n; ++i) store_u16_le(out + 2 * i, f32_to_bf16(in[i]));
      });
    case FormatId::kInt8:
    case FormatId::kInt8G64:
    case FormatId::kInt8G128:
    case FormatId::kInt8Kivi:
      return each_row([&](const float* in, uint8_t* out) { pack_int_row<8>(in, n, group, out); });
    case FormatId::kInt4:
    case FormatId::kInt4G64:
    case FormatId::kInt4G128:
    case FormatId::kInt4Kivi:
      return each_row([&](const float* in, uint8_t* out) { pack_int_row<4>(in, n, group, out); });
    case FormatId::kInt2:
    case FormatId::kInt2G64:
    case FormatId::kInt2G128:
    case FormatId::kInt2Kivi:
      return each_row([&](const float* in, uint8_t* out) { pack_int_row<2>(in, n, group, out); });
    case FormatId::kQ8_0:
    case FormatId::kQ4_0:
    case FormatId::kQ4_1:
    case FormatId::kQ5_0:
    case FormatId::kQ5_1:
    case FormatId::kIq4Nl: {
      const BlockQuantizer quantize = ggml_quantizer(format.id());
      const size_t block_bytes = static_cast<size_t>(format.info().block_bytes);
      return each_row([&](const float* in, uint8_t* out) {
        for (size_t b = 0; b < n / kGgmlBlock; ++b)
          quantize(in + b * kGgmlBlock, out + b * block_bytes);
      });
    }
    case FormatId::kFp8E4M3:
      return each_row([&](const float* in, uint8_t* out) {
        for (size_t i = 0; i < n; ++i) out[i] = f32_to_fp8_e4m3(in[i] / scale);
      });
    case FormatId::kFp8E5M2:
      return each_row([&](const float* in, uint8_t* out) {
        for (size_t i = 0; i < n; ++i) out[i] = f32_to_fp8_e5m2(in[i] / scale);
      });
    case FormatId::kSlot:
      break;
  }
  fail(ErrorCode::kInternal, "pack: format {} has no row layout", format.name());
}

void unpack_rows_unchecked(Format format, const uint8_t* src, size_t n_rows, size_t n,
                           size_t row_bytes, float* y, const PackOptions& options) {
  const auto each_row = [&](auto&& unpack_one) {
    for (size_t r = 0; r < n_rows; ++r) unpack_one(src + r * row_bytes, y + r * n);
  };
  const size_t group = effective_group_size(format, n, options.group_size);
  const float scale = options.fp8_scale;
  switch (format.id()) {
    case FormatId::kF32:
      return each_row(
          [&](const uint8_t* in, float* out) { std::memcpy(out, in, n * sizeof(float)); });
    case FormatId::kF16:
      return each_row([&](const uint8_t* in, float* out) {
        for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16_le(in + 2 * i));
      });
    case FormatId::kBF16:
      return each_row([&](const uint8_t* in, float* out) {
        for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16_le(in + 2 * i));
      });
    case FormatId::kInt8:
    case FormatId::kInt8G64:
    case FormatId::kInt8G128:
    case FormatId::kInt8Kivi:
      return each_row([&](const uint8_t* in, float* out) { unpack_int_row<8>(in, n, group, out); });
    case FormatId::kInt4:
    case FormatId::kInt4G64:
    case FormatId::kInt4G128:
    case FormatId::kInt4Kivi:
      return each_row([&](const uint8_t* in, float* out) { unpack_int_row<4>(in, n, group, out); });
    case FormatId::kInt2:
    case FormatId::kInt2G64:
    case FormatId::kInt2G128:
    case FormatId::kInt2Kivi:
      return each_row([&](const uint8_t* in, float* out) { unpack_int_row<2>(in, n, group, out); });
    case FormatId::kQ8_0:
    case FormatId::kQ4_0:
    case FormatId::kQ4_1:
    case FormatId::kQ5_0:
    case FormatId::kQ5_1:
    case FormatId::kIq4Nl: {
      const BlockDequantizer dequantize = ggml_dequantizer(format.id());
      const size_t block_bytes = static_cast<size_t>(format.info().block_bytes);
      return each_row([&](const uint8_t* in, float* out) {
        for (size_t b = 0; b < n / kGgmlBlock; ++b)
          dequantize(in + b * block_bytes, out + b * kGgmlBlock);
      });
    }
    case FormatId::kFp8E4M3:
      return each_row([&](const uint8_t* in, float* out) {
        for (size_t i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(in[i]) * scale;
      });
    case FormatId::kFp8E5M2:
      return each_row([&](const uint8_t* in, float* out) {
        for (size_t i = 0; i < n; ++i) out[i] = fp8_e5m2_to_f32(in[i]) * scale;
      });
    case FormatId::kSlot:
      break;
  }
  fail(ErrorCode::kInternal, "unpack: format {} has no row layout", format.name());
}

}  // namespace

void pack_row(Format format, std::span<const float> values, std::span<uint8_t> out,
              const PackOptions& options) {
  check_sizes(format, values.size(), out.size(), options.group_size);
  if (format.family() == FormatFamily::kFp8) check_fp8_scale(format, options.fp8_scale);
  pack_rows_unchecked(format, values.data(), 1, values.size(), out.size(), out.data(), options);
}

void unpack_row(Format format, std::span<const uint8_t> packed, std::span<float> values,
                const PackOptions& options) {
  check_sizes(format, values.size(), packed.size(), options.group_size);
  if (format.family() == FormatFamily::kFp8) check_fp8_scale(format, options.fp8_scale);
  unpack_rows_unchecked(format, packed.data(), 1, values.size(), packed.size(), values.data(),
                        options);
}

void pack_rows(Format format, const float* values, size_t n_rows, size_t row_len, uint8_t* out,
               const PackOptions& options) {
  const size_t row_bytes = packed_row_bytes(format, row_len, options.group_size);
  if (format.family() == FormatFamily::kFp8) check_fp8_scale(format, options.fp8_scale);
  pack_rows_unchecked(format, values, n_rows, row_len, row_bytes, out, options);
}

void unpack_rows(Format format, const uint8_t* packed, size_t n_rows, size_t row_len, float* values,
                 const PackOptions& options) {
  const size_t row_bytes = packed_row_bytes(format, row_len, options.group_size);
  if (format.family() == FormatFamily::kFp8) check_fp8_scale(format, options.fp8_scale);
  unpack_rows_unchecked(format, packed, n_rows, row_len, row_bytes, values, options);
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
  PackOptions per_channel = options;
  per_channel.group_size = n_tokens;
  std::vector<float> column(n_tokens);
  for (size_t c = 0; c < n_channels; ++c) {
    unpack_row(format, packed.subspan(c * row_bytes, row_bytes), column, per_channel);
    for (size_t t = 0; t < n_tokens; ++t) values[t * token_stride + c] = column[t];
  }
}

float fp8_scale_for_absmax(Format format, float absmax) {
  if (!(absmax > 0.0f) || !std::isfinite(absmax)) return 1.0f;
  switch (format.id()) {
    case FormatId::kFp8E4M3:
      return absmax / kFp8E4m3Max;
    case FormatId::kFp8E5M2:
      return absmax / kFp8E5m2Max;
    default:
      fail(ErrorCode::kInvalidArgument, "format {} has no FP8 scale", format.name());
  }
}

}  // namespace kvplan
