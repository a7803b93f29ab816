// OCP MX (MXFP4, MXFP6 E2M3, MXFP8 E4M3), NVFP4 and vLLM's fp8_per_token_head bytes worked out by
// hand from the formats' definitions (src/formats/kv_format_math.h cites them). MXFP4 is also
// checked against gguf-py's quantizer in ggml_golden_test.cpp.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/pack.h"
#include "hex.h"

namespace kvplan {
namespace {

using test::to_hex;

std::string packed_hex(const char* name, const std::vector<float>& row, float tensor_scale = 1) {
  const Format f = Format::parse(name);
  std::vector<uint8_t> out(packed_row_bytes(f, row.size(), 32), 0xAB);
  pack_row(f, row, out, {.fp8_scale = tensor_scale});
  return to_hex(out);
}

std::vector<float> unpacked(const char* name, const std::string& hex, size_t n,
                            float tensor_scale = 1) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  std::vector<float> out(n, NAN);
  unpack_row(Format::parse(name), bytes, out, {.fp8_scale = tensor_scale});
  return out;
}

TEST(Mxfp4, ScaleFromAmaxAndGgmlFirstNearestCodes) {
  // amax 7: e = floor(log2 7) - 2 + 127 = 127, d = 2^-1, so the codebook is E2M1 itself.
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;    // index 7
  x[1] = 0.25f;   // 0 and 0.5 tie: the first (0) wins
  x[2] = 0.75f;   // 0.5 and 1 tie: 0.5 (index 1), where round-to-even would take 1
  x[3] = 2.5f;    // 2 (index 4)
  x[4] = 5.0f;    // 4 (index 6)
  x[5] = 7.0f;    // saturates to 6 (index 7)
  x[6] = -1.5f;   // index 8 + 3
  x[7] = -0.1f;   // nearest is +0 (index 0, never -0's index 8)
  x[16] = -6.0f;  // index 15, high nibble of byte 0
  x[17] = 1.0f;   // index 2
  const std::string hex = packed_hex("mxfp4", x);
  EXPECT_EQ(hex,
            "7f"
            "f7200104"
            "06070b00"
            "00000000"
            "00000000");
  const std::vector<float> y = unpacked("mxfp4", hex, 32);
  const std::vector<float> expected_head = {6, 0, 0.5f, 2, 4, 6, -1.5f, 0};
  for (size_t i = 0; i < expected_head.size(); ++i) EXPECT_EQ(y[i], expected_head[i]) << i;
  EXPECT_EQ(y[16], -6.0f);
  EXPECT_EQ(y[17], 1.0f);
}

TEST(Mxfp4, SharedExponentIsTheExactFloorOfLog2) {
  // amax just below 4: floor(log2) is 1, so e = 126 (OCP's definition). ggml's C code takes
  // floorf(log2f(amax)), and log2f rounds this amax up to 2.0, which would give 127.
  std::vector<float> x(32, 0.0f);
  x[0] = std::nextafter(4.0f, 0.0f);
  EXPECT_EQ(packed_hex("mxfp4", x).substr(0, 4), "7e07");  // saturates to 6 * 2^-1 = 3
  x[0] = 0.0f;
  EXPECT_EQ(packed_hex("mxfp4", x).substr(0, 2), "00");  // an all-zero block stores e = 0
}

TEST(Mxfp8, E8m0ScaleAndSaturatingE4m3Elements) {
  // amax 1.9: shared = floor(log2 1.9) - 8 = -8, byte 119; elements are x * 256.
  std::vector<float> x(32, 0.0f);
  x[0] = 1.9f;                   // 486.4 saturates to 448: 0x7e
  x[1] = 0.5f;                   // 128 = 2^7: exponent field 14, 0x70
  x[2] = -0.25f;                 // -64: 0x80 | 13 << 3
  x[3] = std::ldexp(1.0f, -20);  // 2^-12 is under half of E4M3's smallest subnormal 2^-9: 0
  const std::string hex = packed_hex("mxfp8_e4m3", x);
  EXPECT_EQ(hex.substr(0, 10), "777e70e800");
  EXPECT_EQ(hex.size(), 66u);
  const std::vector<float> y = unpacked("mxfp8_e4m3", hex, 32);
  EXPECT_EQ(y[0], 448.0f / 256.0f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], -0.25f);
  EXPECT_EQ(y[3], 0.0f);
}

TEST(Mxfp6, E2m3CodesPackFourToThreeBytes) {
  // amax 1.9: shared = 0 - 2 = -2, byte 125; elements are x * 4.
  std::vector<float> x(32, 0.0f);
  x[0] = 1.9f;    // 7.6 saturates to 7.5: code 0b011111
  x[1] = 0.5f;    // 2: exponent field 2, code 0b010000
  x[2] = -0.25f;  // -1: exponent field 1 with the sign, code 0b101000
  // Bit stream: 0x1f | 0x10 << 6 | 0x28 << 12 = 0x2841f.
  const std::string hex = packed_hex("mxfp6_e2m3", x);
  EXPECT_EQ(hex.substr(0, 8), "7d1f8402");
  EXPECT_EQ(hex.size(), 50u);
  const std::vector<float> y = unpacked("mxfp6_e2m3", hex, 32);
  EXPECT_EQ(y[0], 7.5f / 4.0f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], -0.25f);
  EXPECT_EQ(y[3], 0.0f);
}

TEST(Nvfp4, CodesThenScalesWithRoundToEvenE2m1) {
  // Tensor scale 1, amax 6: block scale e4m3(6 / 6) = 1 (0x38); codes are E2M1 of x itself.
  const std::vector<float> g = {6,     0.25f, 0.75f, 2.5f, 5, 1.75f, 3.5f, -3,
                                -0.5f, 1.25f, 0,     0,    0, 0,     0,    0};
  // Ties go to the even code: 0.25 -> 0, 0.75 -> 1, 2.5 -> 2, 5 -> 4, 1.75 -> 2, 3.5 -> 4,
  // 1.25 -> 1. Element 2i is the low nibble of byte i.
  const std::string codes = "074246d629000000";
  EXPECT_EQ(packed_hex("nvfp4", g), codes + "38");
  const std::vector<float> y = unpacked("nvfp4", codes + "38", 16);
  const std::vector<float> expected = {6, 0, 1, 2, 4, 2, 4, -3, -0.5f, 1, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(y[i], expected[i]) << i;

  // Two groups: every group's codes first, then one scale byte per group (vLLM's row).
  std::vector<float> row = g;
  for (const float v : g) row.push_back(v * 0.5f);  // block scale 0.5 (0x30), same codes
  EXPECT_EQ(packed_hex("nvfp4", row), codes + codes + "38" + "30");

  // A tensor scale of 2 moves into the block scale (global 1/2: e4m3(0.5) = 0x30); values are
  // code x block scale x tensor scale.
  EXPECT_EQ(packed_hex("nvfp4", g, 2.0f), codes + "30");
  const std::vector<float> y2 = unpacked("nvfp4", codes + "30", 16, 2.0f);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(y2[i], expected[i]) << i;
}

TEST(Fp8PerTokenHead, CodesThenTheRowsF32Scale) {
  // amax 896: s = 896 / 448 = 2, codes are E4M3(x / 2): 448 -> 0x7e, -224 -> 0xf6 (exponent
  // field 14, mantissa 6), 0.25 -> 0x28; then s = 2.0f little-endian.
  EXPECT_EQ(packed_hex("fp8_per_token_head", {896, -448, 0.5f, 0}), "7ef6280000000040");
  const std::vector<float> y = unpacked("fp8_per_token_head", "7ef6280000000040", 4);
  EXPECT_EQ(y, (std::vector<float>{896, -448, 0.5f, 0}));
  // An all-zero row keeps vLLM's floor: s = 1e-6.
  const std::string zero = packed_hex("fp8_per_token_head", {0, 0, 0, 0});
  float s = 1e-6f;
  uint32_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  EXPECT_EQ(zero, "00000000" +
                      to_hex({static_cast<uint8_t>(bits), static_cast<uint8_t>(bits >> 8),
                              static_cast<uint8_t>(bits >> 16), static_cast<uint8_t>(bits >> 24)}));
}

TEST(HadamardRotated, AUnitVectorSpreadsEvenlyOverTheRow) {
  // The normalized Hadamard transform of e_0 over 32 values is 1/sqrt(32) everywhere, so q8_0 of
  // it is d = (1/sqrt(32)) / 127 (f16 0x15b4) and every code 127.
  std::vector<float> e0(32, 0.0f);
  e0[0] = 1.0f;
  std::string codes;
  for (int i = 0; i < 32; ++i) codes += "7f";
  EXPECT_EQ(packed_hex("q8_0_had", e0), "b415" + codes);
  // Unpacking rotates back: e_0 again, within q8_0's error of the spread values.
  const std::vector<float> y = unpacked("q8_0_had", packed_hex("q8_0_had", e0), 32);
  EXPECT_NEAR(y[0], 1.0f, 1e-3);
  for (size_t i = 1; i < y.size(); ++i) EXPECT_NEAR(y[i], 0.0f, 1e-3) << i;
  // Rows must be a power of two.
  EXPECT_THROW((void)packed_row_bytes(Format::parse("q4_0_had"), 96, 32), Error);
  EXPECT_EQ(packed_row_bytes(Format::parse("q4_0_had"), 128, 32), 72u);
}

std::string repeated(const std::string& bytes, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += bytes;
  return out;
}

TEST(HadamardRotated, AsymmetricAndFiveBitBlocksOfTheRotatedRow) {
  // e_0 + e_1 over 32 values rotates (natural-order Sylvester, entries +-1/sqrt(32)) to
  // y_i = 2/sqrt(32) = 0.35355 at even i and exactly 0 at odd i. Element j and j + 16 share byte j
  // of qs (j low nibble), so the nibbles follow the parity of j; a fifth bit of value j is bit j
  // of the little-endian qh word.
  std::vector<float> x(32, 0.0f);
  x[0] = x[1] = 1.0f;
  // q4_1: min 0 (f16 0x0000), d = 0.35355 / 15 (f16 0x2609); codes 15 at even j, 0 at odd j.
  EXPECT_EQ(packed_hex("q4_1_had", x),
            "0926"
            "0000" +
                repeated("ff00", 8));
  // q5_0: the signed value of largest magnitude is +0.35355, d = it / -16 (f16 0xa5a8); codes
  // y / d + 16: 0 at even j, 16 at odd j (low nibbles 0, fifth bits on odd j: 0xaaaaaaaa).
  EXPECT_EQ(packed_hex("q5_0_had", x),
            "a8a5"
            "aaaaaaaa" +
                repeated("00", 16));
  // q5_1: min 0, d = 0.35355 / 31 (f16 0x21d7); codes 31 at even j, 0 at odd j.
  EXPECT_EQ(packed_hex("q5_1_had", x),
            "d721"
            "0000"
            "55555555" +
                repeated("ff00", 8));
  // Unpacking rotates back to e_0 + e_1 within the f16 scale's rounding.
  for (const char* f : {"q4_1_had", "q5_0_had", "q5_1_had"}) {
    const std::vector<float> y = unpacked(f, packed_hex(f, x), 32);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], x[i], 2e-3) << f << " " << i;
  }
}

TEST(IkLlamaCppQ6_0, SixBitCodesWithTheirTopBitsInQh) {
  // x_j = (j - 16) / 2: the signed value of largest magnitude is x_0 = -8, d = -8 / -32 = 0.25
  // (f16 0x3400) and the codes are x / d + 32 = 2j. Nibbles: value j and j + 16 share byte j of
  // qs, both (2j) & 15. Top bits (2j) >> 4 = j / 8: qh byte k holds values k (0), k + 16 (2),
  // k + 8 (1) and k + 24 (3) from its low bits up: 0 | 2 << 2 | 1 << 4 | 3 << 6 = 0xd8.
  std::vector<float> x(32);
  for (size_t j = 0; j < x.size(); ++j) x[j] = (static_cast<float>(j) - 16.0f) / 2.0f;
  const std::string qs = "0022446688aaccee";
  EXPECT_EQ(packed_hex("q6_0", x), "0034" + repeated("d8", 8) + qs + qs);
  EXPECT_EQ(unpacked("q6_0", packed_hex("q6_0", x), 32), x);  // every value on the grid
  // The top of the range clamps: +x_max / d + 32.5 = 64.5 would need a seventh bit, so 63.
  std::vector<float> top(32, 0.0f);
  top[5] = -1.0f;
  top[6] = 1.0f;
  const std::vector<float> back = unpacked("q6_0", packed_hex("q6_0", top), 32);
  EXPECT_EQ(back[5], -1.0f);
  EXPECT_FLOAT_EQ(back[6], 31.0f / 32.0f);
  // 26 bytes per 32 values: 6.5 bits, between mxfp6 (6.25) and q8_0 (8.5).
  EXPECT_EQ(packed_row_bytes(Format::parse("q6_0"), 128, 32), 104u);
  EXPECT_EQ(packed_row_bytes(Format::parse("q6_0_had64"), 192, 32), 156u);
}

TEST(HadamardRotated, SpansOf64AreRotatedOnTheirOwn) {
  // x_0 = x_64 = 1 in a row of 128. Each span of 64 holds one unit vector, which rotates to 1/8
  // everywhere: q8_0 blocks with d = (1/8) / 127 (f16 0x1408) and every code 127.
  std::vector<float> x(128, 0.0f);
  x[0] = x[64] = 1.0f;
  const std::string eighth_block = "0814" + repeated("7f", 32);
  EXPECT_EQ(packed_hex("q8_0_had64", x), repeated(eighth_block, 4));
  // Rotated as one row of 128 they cancel in the second half: 2/sqrt(128) = 0.17678 in the first
  // 64 rotated values (d f16 0x15b4), 0 in the last 64 (d 0, codes 0).
  EXPECT_EQ(packed_hex("q8_0_had", x),
            repeated("b415" + repeated("7f", 32), 2) + repeated("0000" + repeated("00", 32), 2));
  // Both unpack to the same row.
  for (const char* f : {"q8_0_had64", "q8_0_had"}) {
    const std::vector<float> y = unpacked(f, packed_hex(f, x), 128);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-3) << f << " " << i;
  }
  // A span format's row is its spans packed as whole rows of 64: q4_0_had64 of 192 values is
  // q4_0_had of each third, and at 64 the two formats are the same bytes.
  std::vector<float> row(192);
  for (size_t i = 0; i < row.size(); ++i)
    row[i] = std::sin(0.37f * static_cast<float>(i)) + 0.01f * i;
  std::string thirds;
  for (size_t s = 0; s < 3; ++s) {
    thirds += packed_hex("q4_0_had",
                         std::vector<float>(row.begin() + 64 * s, row.begin() + 64 * (s + 1)));
  }
  EXPECT_EQ(packed_hex("q4_0_had64", row), thirds);
  const std::vector<float> first(row.begin(), row.begin() + 64);
  EXPECT_EQ(packed_hex("iq4_nl_had64", first), packed_hex("iq4_nl_had", first));
  // Rows must be whole spans; they need not be a power of two.
  EXPECT_EQ(packed_row_bytes(Format::parse("q5_1_had64"), 192, 32), 144u);
  EXPECT_THROW((void)packed_row_bytes(Format::parse("q4_0_had64"), 96, 32), Error);
  EXPECT_THROW((void)packed_row_bytes(Format::parse("q4_0_had"), 192, 32), Error);
}

TEST(Nvfp4, RowsMustBeWholeGroupsOf16) {
  EXPECT_EQ(packed_row_bytes(Format::parse("nvfp4"), 128, 32), 72u);
  EXPECT_EQ(packed_row_bytes(Format::parse("nvfp4"), 16, 32), 9u);
  EXPECT_THROW((void)packed_row_bytes(Format::parse("nvfp4"), 24, 32), Error);
  EXPECT_THROW((void)packed_row_bytes(Format::parse("mxfp4"), 48, 32), Error);
}

}  // namespace
}  // namespace kvplan
