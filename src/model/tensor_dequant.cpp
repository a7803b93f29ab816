#include "model/tensor_dequant.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "formats/float_convert.h"
#include "formats/ggml_rows_avx2.h"
#include "formats/kv_format_math.h"
#include "model/gguf_file.h"
#include "model/kquant_blocks.h"

namespace kvplan {
namespace {

// The j-th 6-bit (scale, min) pair of Q4_K/Q5_K's 12 packed scale bytes: pairs 0..3 sit in the
// low 6 bits of bytes j and j+4; pairs 4..7 keep their low 4 bits in byte j+4 and their top 2 bits
// in the spare high bits of bytes j-4 (scale) and j (min).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

struct BlockCodec {
  size_t values;
  size_t bytes;
  BlockFn fn;
};

bool block_codec(GgmlType type, BlockCodec* codec) {
  switch (type) {
    case GgmlType::kQ8_0:
      *codec = {kGgmlBlock, sizeof(BlockQ8_0), dequantize_block_q8_0};
      return true;
    case GgmlType::kQ4_0:
      *codec = {kGgmlBlock, sizeof(BlockQ4_0), dequantize_block_q4_0};
      return true;
    case GgmlType::kQ4_1:
      *codec = {kGgmlBlock, sizeof(BlockQ4_1), dequantize_block_q4_1};
      return true;
    case GgmlType::kQ5_0:
      *codec = {kGgmlBlock, sizeof(BlockQ5_0), dequantize_block_q5_0};
      return true;
    case GgmlType::kQ5_1:
      *codec = {kGgmlBlock, sizeof(BlockQ5_1), dequantize_block_q5_1};
      return true;
    case GgmlType::kQ4_K:
      *codec = {kQK_K, kBlockQ4KBytes, dequantize_block_q4_k};
      return true;
    case GgmlType::kQ5_K:
      *codec = {kQK_K, kBlockQ5KBytes, dequantize_block_q5_k};
      return true;
    case GgmlType::kQ6_K:
      *codec = {kQK_K, kBlockQ6KBytes, dequantize_block_q6_k};
      return true;
    default:
      return false;
  }
}

std::string type_name(GgmlType type) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  return info != nullptr ? std::string(info->name)
                         : fmt::format("#{}", static_cast<uint32_t>(type));
}

void check_length(std::span<const std::byte> bytes, size_t needed, std::string_view what,
                  GgmlType type, size_t n_values) {
  if (bytes.size() < needed) {
    fail(ErrorCode::kOutOfRange, "{}: {} values of type {} need {} bytes, only {} available", what,
         n_values, type_name(type), needed, bytes.size());
  }
}

}  // namespace

void dequantize_block_q4_k(const uint8_t* block, float* out) {
  const float d = f16_to_f32(load_u16_le(block));
  const float dmin = f16_to_f32(load_u16_le(block + 2));
  const uint8_t* scales = block + 4;
  const uint8_t* q = block + 4 + kKScaleSize;
  // Each 64-value chunk: 32 bytes whose low nibbles are sub-block 2c and high nibbles 2c+1.
  for (int chunk = 0; chunk < kQK_K / 64; ++chunk) {
    uint8_t sc, m;
    get_scale_min_k4(2 * chunk, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    get_scale_min_k4(2 * chunk + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) out[l] = d1 * static_cast<float>(q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l) out[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
    out += 64;
  }
}

void dequantize_block_q5_k(const uint8_t* block, float* out) {
  const float d = f16_to_f32(load_u16_le(block));
  const float dmin = f16_to_f32(load_u16_le(block + 2));
  const uint8_t* scales = block + 4;
  const uint8_t* qh = block + 4 + kKScaleSize;
  const uint8_t* ql = qh + kQK_K / 8;
  for (int chunk = 0; chunk < kQK_K / 64; ++chunk) {
    uint8_t sc, m;
    get_scale_min_k4(2 * chunk, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    get_scale_min_k4(2 * chunk + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    const uint8_t bit_lo = static_cast<uint8_t>(1u << (2 * chunk));
    const uint8_t bit_hi = static_cast<uint8_t>(2u << (2 * chunk));
    for (int l = 0; l < 32; ++l) {
      const int q = (ql[l] & 0x0f) + ((qh[l] & bit_lo) ? 16 : 0);
      out[l] = d1 * static_cast<float>(q) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int q = (ql[l] >> 4) + ((qh[l] & bit_hi) ? 16 : 0);
      out[32 + l] = d2 * static_cast<float>(q) - m2;
    }
    ql += 32;
    out += 64;
  }
}

void dequantize_block_q6_k(const uint8_t* block, float* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + kQK_K / 2;
  const int8_t* sc = reinterpret_cast<const int8_t*>(block + kQK_K / 2 + kQK_K / 4);
  const float d = f16_to_f32(load_u16_le(block + kQK_K / 2 + kQK_K / 4 + kQK_K / 16));
  // Two halves of 128 values; in each, value l + 32*k (k = 0..3) takes ql's nibble (k / 2) of byte
  // l + 32*(k % 2) and bits 2k..2k+1 of qh[l]; sub-block scale index = l / 16 + 2k.
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    out += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

bool can_dequantize(GgmlType type) {
  BlockCodec codec{};
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         block_codec(type, &codec);
}

void dequantize_row(GgmlType type, const std::byte* bytes, size_t n_values, float* out) {
  const auto* src = reinterpret_cast<const uint8_t*>(bytes);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(out, src, n_values * 4);
      return;
#if defined(KVPLAN_HAVE_AVX2_ROWS)
    case GgmlType::kF16:
      f16_to_f32_avx2(src, n_values, out);
      return;
    case GgmlType::kBF16:
      bf16_to_f32_avx2(src, n_values, out);
      return;
#else
    case GgmlType::kF16:
      for (size_t i = 0; i < n_values; ++i) out[i] = f16_to_f32(load_u16_le(src + 2 * i));
      return;
    case GgmlType::kBF16:
      for (size_t i = 0; i < n_values; ++i) out[i] = bf16_to_f32(load_u16_le(src + 2 * i));
      return;
#endif
#if defined(KVPLAN_HAVE_AVX2_ROWS)
    case GgmlType::kQ4_0:
      dequantize_q4_0_blocks_avx2(src, n_values / kGgmlBlock, out);
      return;
    case GgmlType::kQ4_1:
      dequantize_q4_1_blocks_avx2(src, n_values / kGgmlBlock, out);
      return;
    case GgmlType::kQ8_0:
      dequantize_q8_0_blocks_avx2(src, n_values / kGgmlBlock, out);
      return;
#endif
    default:
      break;
  }
  BlockCodec codec{};
  if (!block_codec(type, &codec)) return;
  const size_t n_blocks = n_values / codec.values;
  for (size_t b = 0; b < n_blocks; ++b) codec.fn(src + b * codec.bytes, out + b * codec.values);
}

void dequantize_tensor(GgmlType type, std::span<const std::byte> bytes, size_t n_values, float* out,
                       std::string_view what) {
  BlockCodec codec{};
  const bool plain = type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
  if (!plain && !block_codec(type, &codec)) {
    fail(ErrorCode::kUnimplemented,
         "{}: tensor type {} cannot be dequantized (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
         "Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
         what, type_name(type));
  }
  if (plain) {
    check_length(bytes, n_values * (type == GgmlType::kF32 ? 4 : 2), what, type, n_values);
    dequantize_row(type, bytes.data(), n_values, out);
    return;
  }
  if (n_values % codec.values != 0) {
    fail(ErrorCode::kInvalidArgument, "{}: {} values is not a whole number of {}-value {} blocks",
         what, n_values, codec.values, type_name(type));
  }
  const size_t n_blocks = n_values / codec.values;
  check_length(bytes, n_blocks * codec.bytes, what, type, n_values);
  const auto* src = reinterpret_cast<const uint8_t*>(bytes.data());
#pragma omp parallel for schedule(static) if (n_blocks > 1024)
  for (size_t b = 0; b < n_blocks; ++b) codec.fn(src + b * codec.bytes, out + b * codec.values);
}

std::vector<float> dequantize_gguf_tensor(const GgufFile& gguf, const GgufTensorInfo& info) {
  const std::string what = fmt::format("{}: tensor '{}'", gguf.path().string(), info.name);
  if (info.type == nullptr) {
    fail(ErrorCode::kUnimplemented, "{}: unknown ggml type {}", what, info.type_id);
  }
  std::vector<float> out(info.n_elements);
  dequantize_tensor(info.type->type, gguf.tensor_bytes(info), info.n_elements, out.data(), what);
  return out;
}

}  // namespace kvplan
