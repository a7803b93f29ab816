#include "formats/pack.h"

#include <vector>

#include "core/error.h"
#include "formats/format_size.h"
#include "kernels/kv_format_math.h"

namespace kvplan {
namespace {

template <int kBits>
void pack_int_row(const float* x, size_t n, size_t group, uint8_t* out) {
  for (size_t start = 0; start < n; start += group) {
    const size_t len = n - start < group ? n - start : group;
    quantize_group_int<kBits>(x + start, static_cast<int>(len), out);
    out += int_group_bytes(len, kBits);
  }
}

template <int kBits>
void unpack_int_row(const uint8_t* in, size_t n, size_t group, float* y) {
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
    case FormatId::kQ8_0: return quantize_block_q8_0;
    case FormatId::kQ4_0: return quantize_block_q4_0;
    case FormatId::kQ4_1: return quantize_block_q4_1;
    case FormatId::kQ5_0: return quantize_block_q5_0;
    case FormatId::kQ5_1: return quantize_block_q5_1;
    case FormatId::kIq4Nl: return quantize_block_iq4_nl;
    default: fail(ErrorCode::kInternal, "not a ggml block format: {}", static_cast<int>(id));
  }
}

BlockDequantizer ggml_dequantizer(FormatId id) {
  switch (id) {
    case FormatId::kQ8_0: return dequantize_block_q8_0;
    case FormatId::kQ4_0: return dequantize_block_q4_0;
    case FormatId::kQ4_1: return dequantize_block_q4_1;
    case FormatId::kQ5_0: return dequantize_block_q5_0;
    case FormatId::kQ5_1: return dequantize_block_q5_1;
    case FormatId::kIq4Nl: return dequantize_block_iq4_nl;
    default: fail(ErrorCode::kInternal, "not a ggml block format: {}", static_cast<int>(id));
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

}  // namespace

void pack_row(Format format, std::span<const float> values, std::span<uint8_t> out,
              const PackOptions& options) {
  const size_t n = values.size();
  check_sizes(format, n, out.size(), options.group_size);
  const float* x = values.data();
  uint8_t* dst = out.data();
  switch (format.id()) {
    case FormatId::kF32: std::memcpy(dst, x, n * sizeof(float)); return;
    case FormatId::kF16:
      for (size_t i = 0; i < n; ++i) store_u16_le(dst + 2 * i, f32_to_f16(x[i]));
      return;
    case FormatId::kBF16:
      for (size_t i = 0; i < n; ++i) store_u16_le(dst + 2 * i, f32_to_bf16(x[i]));
      return;
    case FormatId::kInt8:
    case FormatId::kInt4:
    case FormatId::kInt2: {
      const size_t group = effective_group_size(format, n, options.group_size);
      if (format.id() == FormatId::kInt8) pack_int_row<8>(x, n, group, dst);
      if (format.id() == FormatId::kInt4) pack_int_row<4>(x, n, group, dst);
      if (format.id() == FormatId::kInt2) pack_int_row<2>(x, n, group, dst);
      return;
    }
    case FormatId::kQ8_0:
    case FormatId::kQ4_0:
    case FormatId::kQ4_1:
    case FormatId::kQ5_0:
    case FormatId::kQ5_1:
    case FormatId::kIq4Nl: {
      const BlockQuantizer quantize = ggml_quantizer(format.id());
      const size_t block_bytes = static_cast<size_t>(format.info().block_bytes);
      for (size_t b = 0; b < n / kGgmlBlock; ++b) quantize(x + b * kGgmlBlock, dst + b * block_bytes);
      return;
    }
    case FormatId::kFp8E4M3:
    case FormatId::kFp8E5M2: {
      check_fp8_scale(format, options.fp8_scale);
      const float scale = options.fp8_scale;
      const bool e4m3 = format.id() == FormatId::kFp8E4M3;
      for (size_t i = 0; i < n; ++i) {
        dst[i] = e4m3 ? f32_to_fp8_e4m3(x[i] / scale) : f32_to_fp8_e5m2(x[i] / scale);
      }
      return;
    }
    case FormatId::kSlot: break;  // packed_row_bytes already refused it
  }
  fail(ErrorCode::kInternal, "pack_row: unhandled format {}", format.name());
}

void unpack_row(Format format, std::span<const uint8_t> packed, std::span<float> values,
                const PackOptions& options) {
  const size_t n = values.size();
  check_sizes(format, n, packed.size(), options.group_size);
  const uint8_t* src = packed.data();
  float* y = values.data();
  switch (format.id()) {
    case FormatId::kF32: std::memcpy(y, src, n * sizeof(float)); return;
    case FormatId::kF16:
      for (size_t i = 0; i < n; ++i) y[i] = f16_to_f32(load_u16_le(src + 2 * i));
      return;
    case FormatId::kBF16:
      for (size_t i = 0; i < n; ++i) y[i] = bf16_to_f32(load_u16_le(src + 2 * i));
      return;
    case FormatId::kInt8:
    case FormatId::kInt4:
    case FormatId::kInt2: {
      const size_t group = effective_group_size(format, n, options.group_size);
      if (format.id() == FormatId::kInt8) unpack_int_row<8>(src, n, group, y);
      if (format.id() == FormatId::kInt4) unpack_int_row<4>(src, n, group, y);
      if (format.id() == FormatId::kInt2) unpack_int_row<2>(src, n, group, y);
      return;
    }
    case FormatId::kQ8_0:
    case FormatId::kQ4_0:
    case FormatId::kQ4_1:
    case FormatId::kQ5_0:
    case FormatId::kQ5_1:
    case FormatId::kIq4Nl: {
      const BlockDequantizer dequantize = ggml_dequantizer(format.id());
      const size_t block_bytes = static_cast<size_t>(format.info().block_bytes);
      for (size_t b = 0; b < n / kGgmlBlock; ++b) {
        dequantize(src + b * block_bytes, y + b * kGgmlBlock);
      }
      return;
    }
    case FormatId::kFp8E4M3:
    case FormatId::kFp8E5M2: {
      check_fp8_scale(format, options.fp8_scale);
      const float scale = options.fp8_scale;
      const bool e4m3 = format.id() == FormatId::kFp8E4M3;
      for (size_t i = 0; i < n; ++i) {
        y[i] = (e4m3 ? fp8_e4m3_to_f32(src[i]) : fp8_e5m2_to_f32(src[i])) * scale;
      }
      return;
    }
    case FormatId::kSlot: break;
  }
  fail(ErrorCode::kInternal, "unpack_row: unhandled format {}", format.name());
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
    case FormatId::kFp8E4M3: return absmax / kFp8E4m3Max;
    case FormatId::kFp8E5M2: return absmax / kFp8E5m2Max;
    default:
      fail(ErrorCode::kInvalidArgument, "format {} has no FP8 scale", format.name());
  }
}

}  // namespace kvplan
