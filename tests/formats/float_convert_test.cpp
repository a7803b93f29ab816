#include "formats/float_convert.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace kvplan {
namespace {

// Independent reference: the representable value nearest to x (ties to the even code) among all
// finite codes of a narrow format, found by brute force in double precision.
template <typename Decode>
uint32_t nearest_code(double x, uint32_t n_codes, Decode decode, uint32_t max_finite_code) {
  double best_err = std::numeric_limits<double>::infinity();
  uint32_t best = 0;
  for (uint32_t c = 0; c < n_codes; ++c) {
    const double v = decode(c);
    if (!std::isfinite(v)) continue;
    if ((c & 0x7fu) > max_finite_code) continue;
    const double err = std::fabs(v - x);
    // Among equal errors prefer an even mantissa (the last bit clear), as RNE does.
    if (err < best_err || (err == best_err && (c & 1u) == 0 && (best & 1u) == 1)) {
      best_err = err;
      best = c;
    }
  }
  return best;
}

std::vector<float> varied_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-30.0f, 20.0f);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> out;
  for (size_t i = 0; i < n; ++i) {
    const float v = std::ldexp(mantissa(rng), static_cast<int>(exponent(rng)));
    out.push_back(rng() & 1 ? v : -v);
  }
  return out;
}

TEST(F16, EveryHalfRoundTripsThroughF32) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32_soft(static_cast<uint16_t>(h));
    EXPECT_EQ(std::isnan(f), std::isnan(f16_to_f32(static_cast<uint16_t>(h))));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f16_to_f32(static_cast<uint16_t>(h)), f);
    EXPECT_EQ(f32_to_f16_soft(f), h) << "half 0x" << std::hex << h;
    EXPECT_EQ(f32_to_f16(f), h) << "half 0x" << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::quiet_NaN()),
            f32_to_f16_soft(std::numeric_limits<float>::quiet_NaN()));
}

TEST(F16, KnownValues) {
  EXPECT_EQ(f32_to_f16_soft(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16_soft(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // exactly halfway to 2^16: rounds to inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (zero)
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
}

TEST(F16, MatchesNearestRepresentable) {
  for (float x : varied_floats(20000, 7)) {
    if (std::fabs(x) >= 65520.0f) continue;
    const uint32_t ref = nearest_code(
        std::fabs(x), 0x7c00,
        [](uint32_t c) { return static_cast<double>(f16_to_f32(static_cast<uint16_t>(c))); },
        0x7fffffff);
    EXPECT_EQ(f32_to_f16_soft(std::fabs(x)), ref) << x;
    EXPECT_EQ(f32_to_f16(std::fabs(x)), ref) << x;
  }
}

#if defined(__F16C__)
TEST(F16, SoftConversionMatchesHardware) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    const float x = f32_from_bits(bits);
    if (std::isnan(x)) continue;
    EXPECT_EQ(f32_to_f16_soft(x), _cvtss_sh(x, 0)) << std::hex << bits;
  }
}
#endif

TEST(BF16, MatchesNearestRepresentable) {
  for (float x : varied_floats(20000, 3)) {
    const uint32_t u = f32_bits(x);
    const uint16_t lo = static_cast<uint16_t>(u >> 16);
    const double a = bf16_to_f32(lo), b = bf16_to_f32(static_cast<uint16_t>(lo + 1));
    const double da = std::fabs(a - x), db = std::fabs(b - x);
    const uint16_t ref = da < db   ? lo
                         : db < da ? static_cast<uint16_t>(lo + 1)
                                   : ((lo & 1) ? lo + 1 : lo);
    EXPECT_EQ(f32_to_bf16(x), ref) << x;
  }
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Fp8, KnownCodes) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_EQ(fp8_e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_e5m2_to_f32(0x3c), 1.0f);
  EXPECT_TRUE(std::isinf(fp8_e5m2_to_f32(0x7c)));
  EXPECT_EQ(f32_to_fp8_e4m3(1e9f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_fp8_e4m3(-1e9f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e5m2(1e9f), 0x7b);
}

TEST(Fp8, EncodersPickTheNearestCode) {
  const auto e4 = [](uint32_t c) {
    return static_cast<double>(fp8_e4m3_to_f32(static_cast<uint8_t>(c)));
  };
  const auto e5 = [](uint32_t c) {
    return static_cast<double>(fp8_e5m2_to_f32(static_cast<uint8_t>(c)));
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-20.0f, 17.0f);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mantissa(rng), static_cast<int>(exponent(rng)));
    const double clamped4 = std::min(static_cast<double>(x), 448.0);
    const double clamped5 = std::min(static_cast<double>(x), 57344.0);
    EXPECT_EQ(f32_to_fp8_e4m3(x), nearest_code(clamped4, 128, e4, 0x7e)) << x;
    EXPECT_EQ(f32_to_fp8_e5m2(x), nearest_code(clamped5, 128, e5, 0x7b)) << x;
    EXPECT_EQ(f32_to_fp8_e4m3(-x), 0x80 | f32_to_fp8_e4m3(x));
  }
  // Every finite code decodes and re-encodes to itself.
  for (uint32_t c = 0; c < 256; ++c) {
    const float v4 = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isfinite(v4) && v4 != 0.0f) {
      EXPECT_EQ(f32_to_fp8_e4m3(v4), c);
    }
    const float v5 = fp8_e5m2_to_f32(static_cast<uint8_t>(c));
    if (std::isfinite(v5) && v5 != 0.0f) {
      EXPECT_EQ(f32_to_fp8_e5m2(v5), c);
    }
  }
}

}  // namespace
}  // namespace kvplan
