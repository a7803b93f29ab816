// Dequantization against hand-built blocks: codes and scales chosen here, expected values computed
// from the ggml layout description (not from the code under test).
#include "model/tensor_dequant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "formats/float_convert.h"
#include "formats/kv_blocks.h"
#include "formats/kv_format_math.h"
#include "model/kquant_blocks.h"

namespace kvplan {
namespace {

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h);
  p[1] = static_cast<uint8_t>(h >> 8);
}

std::vector<float> dequant(GgmlType type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n);
  dequantize_tensor(type, std::as_bytes(std::span(bytes)), n, out.data(), "test tensor");
  return out;
}

TEST(TensorDequant, PlainTypes) {
  const std::vector<float> values = {1.5f, -2.25f, 0.0f, 65504.0f};
  std::vector<uint8_t> f32(16), f16(8), bf16(8);
  std::memcpy(f32.data(), values.data(), 16);
  for (size_t i = 0; i < 4; ++i) {
    put_f16(&f16[2 * i], values[i]);
    const uint16_t b = f32_to_bf16(values[i]);
    bf16[2 * i] = static_cast<uint8_t>(b);
    bf16[2 * i + 1] = static_cast<uint8_t>(b >> 8);
  }
  EXPECT_EQ(dequant(GgmlType::kF32, f32, 4), values);
  EXPECT_EQ(dequant(GgmlType::kF16, f16, 4), values);
  const std::vector<float> b = dequant(GgmlType::kBF16, bf16, 4);
  EXPECT_EQ(b[0], 1.5f);
  EXPECT_EQ(b[1], -2.25f);
  EXPECT_EQ(b[3], 65536.0f);  // bf16 keeps 8 mantissa bits: 65504 rounds to 2^16
}

TEST(TensorDequant, Q8_0AndQ4_0Blocks) {
  std::vector<uint8_t> q8(34);
  put_f16(q8.data(), 0.5f);
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  const std::vector<float> y8 = dequant(GgmlType::kQ8_0, q8, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y8[j], 0.5f * static_cast<float>(j - 16)) << j;

  std::vector<uint8_t> q4(18);
  put_f16(q4.data(), 2.0f);
  for (int j = 0; j < 16; ++j) q4[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y4 = dequant(GgmlType::kQ4_0, q4, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y4[j], 2.0f * static_cast<float>(j - 8));
    EXPECT_EQ(y4[j + 16], 2.0f * static_cast<float>(7 - j));
  }
}

// Weight rows take vector paths (formats/ggml_rows_avx2.h): every value must carry the bits of the
// scalar block and conversion functions, over random codes and scales (subnormal f16 included).
TEST(TensorDequant, VectorRowsCarryTheScalarFunctionsBits) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> finite_f16(0, 0x7bff);  // zero, subnormals, normals
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0}) {
    const size_t block_bytes = type == GgmlType::kQ4_1   ? sizeof(BlockQ4_1)
                               : type == GgmlType::kQ4_0 ? sizeof(BlockQ4_0)
                                                         : sizeof(BlockQ8_0);
    constexpr size_t kBlocks = 37;
    std::vector<uint8_t> bytes(kBlocks * block_bytes);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
    for (size_t b = 0; b < kBlocks; ++b) {
      const int scales = type == GgmlType::kQ4_1 ? 2 : 1;
      for (int s = 0; s < scales; ++s) {
        const uint16_t h = static_cast<uint16_t>(finite_f16(rng) | (byte(rng) & 1 ? 0x8000 : 0));
        store_u16_le(bytes.data() + b * block_bytes + 2 * static_cast<size_t>(s), h);
      }
    }
    std::vector<float> row(kBlocks * 32), blocks(kBlocks * 32);
    dequantize_row(type, reinterpret_cast<const std::byte*>(bytes.data()), row.size(), row.data());
    for (size_t b = 0; b < kBlocks; ++b) {
      const uint8_t* in = bytes.data() + b * block_bytes;
      if (type == GgmlType::kQ4_1) {
        dequantize_block_q4_1(in, blocks.data() + b * 32);
      } else if (type == GgmlType::kQ4_0) {
        dequantize_block_q4_0(in, blocks.data() + b * 32);
      } else {
        dequantize_block_q8_0(in, blocks.data() + b * 32);
      }
    }
    for (size_t i = 0; i < row.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(row[i]), std::bit_cast<uint32_t>(blocks[i]))
          << static_cast<int>(type) << " value " << i;
    }
  }
}

TEST(TensorDequant, F16AndBF16RowsWidenEveryBitPattern) {
  // Every 16-bit pattern (NaNs, infinities, subnormals), 65,536 values in a row of 2 x 2^16 bytes.
  std::vector<uint8_t> bytes(2u << 16);
  for (uint32_t h = 0; h < (1u << 16); ++h)
    store_u16_le(bytes.data() + 2 * h, static_cast<uint16_t>(h));
  std::vector<float> row(1u << 16);
  for (const GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    dequantize_row(type, reinterpret_cast<const std::byte*>(bytes.data()), row.size(), row.data());
    for (uint32_t h = 0; h < (1u << 16); ++h) {
      const auto bits = static_cast<uint16_t>(h);
      const float want = type == GgmlType::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits);
      ASSERT_EQ(std::bit_cast<uint32_t>(row[h]), std::bit_cast<uint32_t>(want))
          << static_cast<int>(type) << " pattern " << h;
    }
  }
}

TEST(TensorDequant, Q4_1Q5_0Q5_1Blocks) {
  std::mt19937 rng(7);
  std::vector<int> codes(32);
  for (int& c : codes) c = static_cast<int>(rng() % 32);
  // q4_1: d, m, nibbles (value j low nibble of byte j, value j+16 high nibble).
  std::vector<uint8_t> q41(20);
  put_f16(q41.data(), 0.25f);
  put_f16(q41.data() + 2, -1.0f);
  for (int j = 0; j < 16; ++j)
    q41[4 + j] = static_cast<uint8_t>((codes[j] & 15) | ((codes[j + 16] & 15) << 4));
  const std::vector<float> y41 = dequant(GgmlType::kQ4_1, q41, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y41[j], 0.25f * static_cast<float>(codes[j] & 15) - 1.0f);
  // q5_0 / q5_1: fifth bit of value j in bit j of the little-endian u32 qh.
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>(codes[j] >> 4) << j;
  std::vector<uint8_t> q50(22), q51(24);
  put_f16(q50.data(), 0.5f);
  put_f16(q51.data(), 0.5f);
  put_f16(q51.data() + 2, 3.0f);
  for (int i = 0; i < 4; ++i) {
    q50[2 + i] = static_cast<uint8_t>(qh >> (8 * i));
    q51[4 + i] = static_cast<uint8_t>(qh >> (8 * i));
  }
  for (int j = 0; j < 16; ++j) {
    q50[6 + j] = q51[8 + j] = static_cast<uint8_t>((codes[j] & 15) | ((codes[j + 16] & 15) << 4));
  }
  const std::vector<float> y50 = dequant(GgmlType::kQ5_0, q50, 32);
  const std::vector<float> y51 = dequant(GgmlType::kQ5_1, q51, 32);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y50[j], 0.5f * static_cast<float>(codes[j] - 16)) << j;
    EXPECT_EQ(y51[j], 0.5f * static_cast<float>(codes[j]) + 3.0f) << j;
  }
}

// Packs 8 six-bit scales and mins the way Q4_K/Q5_K store them: sub-blocks 0..3 in the low 6 bits
// of bytes 0..3 (scale) and 4..7 (min); sub-blocks 4..7 split into low 4 bits in bytes 8..11 (scale
// low nibble, min high nibble) and top 2 bits in the spare bits 6..7 of bytes 0..3 / 4..7.
void pack_k4_scales(const int* sc, const int* mn, uint8_t* out) {
  for (int i = 0; i < 4; ++i) {
    out[i] = static_cast<uint8_t>(sc[i] | ((sc[i + 4] >> 4) << 6));
    out[i + 4] = static_cast<uint8_t>(mn[i] | ((mn[i + 4] >> 4) << 6));
    out[i + 8] = static_cast<uint8_t>((sc[i + 4] & 15) | ((mn[i + 4] & 15) << 4));
  }
}

TEST(TensorDequant, Q4_KAndQ5_KSuperBlocks) {
  std::mt19937 rng(11);
  int sc[8], mn[8];
  for (int i = 0; i < 8; ++i) {
    sc[i] = static_cast<int>(rng() % 64);
    mn[i] = static_cast<int>(rng() % 64);
  }
  std::vector<int> codes(256);
  for (int& c : codes) c = static_cast<int>(rng() % 32);
  const float d = 0.125f, dmin = 0.0625f;
  std::vector<uint8_t> q4k(sizeof(BlockQ4K)), q5k(sizeof(BlockQ5K));
  for (auto* b : {&q4k, &q5k}) {
    put_f16(b->data(), d);
    put_f16(b->data() + 2, dmin);
    pack_k4_scales(sc, mn, b->data() + 4);
  }
  // Value e: sub-block s = e / 32 in chunk s / 2; even sub-blocks use the low nibble of
  // qs[32 * chunk + e % 32], odd ones the high nibble; Q5_K's fifth bit is bit s of qh[e % 32].
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32, byte = 32 * (s / 2) + l;
    const int low4 = codes[e] & 15;
    q4k[16 + byte] |= static_cast<uint8_t>(s % 2 ? low4 << 4 : low4);
    q5k[48 + byte] |= static_cast<uint8_t>(s % 2 ? low4 << 4 : low4);
    q5k[16 + l] |= static_cast<uint8_t>((codes[e] >> 4) << s);
  }
  const std::vector<float> y4 = dequant(GgmlType::kQ4_K, q4k, 256);
  const std::vector<float> y5 = dequant(GgmlType::kQ5_K, q5k, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    const float scale = d * static_cast<float>(sc[s]), min = dmin * static_cast<float>(mn[s]);
    EXPECT_EQ(y4[e], scale * static_cast<float>(codes[e] & 15) - min) << e;
    EXPECT_EQ(y5[e], scale * static_cast<float>(codes[e]) - min) << e;
  }
}

TEST(TensorDequant, Q6_KSuperBlock) {
  std::mt19937 rng(13);
  std::vector<int> codes(256);
  for (int& c : codes) c = static_cast<int>(rng() % 64);
  int8_t scales[16];
  for (int8_t& s : scales) s = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<uint8_t> b(sizeof(BlockQ6K));
  uint8_t* ql = b.data();
  uint8_t* qh = b.data() + 128;
  std::memcpy(b.data() + 192, scales, 16);
  put_f16(b.data() + 208, 0.03125f);
  // Value e: half h = e / 128, k = (e % 128) / 32, l = e % 32. Low 4 bits: nibble k / 2 of
  // ql[64 h + l + 32 (k % 2)]; high 2 bits: bits 2k..2k+1 of qh[32 h + l]; scale 8 h + l / 16 + 2k.
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    ql[64 * h + l + 32 * (k % 2)] |= static_cast<uint8_t>((codes[e] & 15) << (4 * (k / 2)));
    qh[32 * h + l] |= static_cast<uint8_t>((codes[e] >> 4) << (2 * k));
  }
  const std::vector<float> y = dequant(GgmlType::kQ6_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const float expected = 0.03125f * static_cast<float>(scales[8 * h + l / 16 + 2 * k]) *
                           static_cast<float>(codes[e] - 32);
    EXPECT_EQ(y[e], expected) << e;
  }
}

TEST(TensorDequant, RefusesUnsupportedTypesAndShortData) {
  std::vector<uint8_t> bytes(84);
  try {
    (void)dequant(GgmlType::kQ2_K, bytes, 256);
    FAIL() << "Q2_K accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("test tensor"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Q2_K"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(can_dequantize(GgmlType::kQ2_K));
  EXPECT_TRUE(can_dequantize(GgmlType::kQ6_K));
  std::vector<uint8_t> short_q8(33);
  EXPECT_THROW((void)dequant(GgmlType::kQ8_0, short_q8, 32), Error);
  std::vector<uint8_t> q8(34);
  EXPECT_THROW((void)dequant(GgmlType::kQ8_0, q8, 31), Error);  // not whole blocks
}

}  // namespace
}  // namespace kvplan
