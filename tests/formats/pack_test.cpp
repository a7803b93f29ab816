#include "formats/pack.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/kv_format_math.h"
#include "formats/kv_row_format.h"
#include "formats/math/hadamard.h"

namespace kvplan {
namespace {

enum class Distribution { kNormal, kOutliers, kPositive, kTiny };

std::vector<float> random_row(size_t n, Distribution dist, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(n);
  for (float& v : row) {
    switch (dist) {
      case Distribution::kNormal:
        v = normal(rng);
        break;
      case Distribution::kOutliers:
        v = normal(rng) * (rng() % 16 == 0 ? 20.0f : 1.0f);
        break;
      case Distribution::kPositive:
        v = 0.5f + std::fabs(normal(rng));
        break;
      case Distribution::kTiny:
        v = normal(rng) * 1e-3f;
        break;
    }
  }
  return row;
}

// An OCP MX element's worst error: x / 2^shared (shared = floor(log2 amax) - emax) rounded to a
// float with `man_bits` mantissa bits and smallest normal exponent `emin` (half a step), or
// saturated at `max_element`.
double mx_error_bound(double amax, double x, int emax, int man_bits, int emin, double max_element) {
  if (amax == 0) return 0;
  const double scale = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(amax))) - emax);
  const double v = std::fabs(x) / scale;
  if (v > max_element) return (v - max_element) * scale;
  return (v * std::ldexp(1.0, -man_bits - 1) + std::ldexp(1.0, emin - man_bits - 1)) * scale;
}

// A TurboQuant key row's error: y = x / |x| rotated (Sylvester Hadamard, in doubles) is a unit
// vector whose coordinates each take the nearest centroid c; the stored key is |x| c / |c| rotated
// back, so any value is off by at most |x| |y - c / |c|| <= 2 |x| |y - c| (f16 norm aside).
double tq_mse_error_bound(const Format& f, std::span<const float> row) {
  const size_t n = row.size();
  double norm = 0;
  for (float v : row) norm += static_cast<double>(v) * v;
  norm = std::sqrt(norm);
  if (norm == 0) return 1e-30;
  const int bits = f.info().bits;
  const int slot = std::countr_zero(n) - std::countr_zero(static_cast<size_t>(kMinTabulatedRow));
  const float* c = bits == 3 ? kTqCentroids3[slot] : kTqCentroids4[slot];
  double err2 = 0;
  for (size_t j = 0; j < n; ++j) {
    double y = 0;
    for (size_t i = 0; i < n; ++i) y += (std::popcount(i & j) % 2 ? -1.0 : 1.0) * row[i];
    y /= norm * std::sqrt(static_cast<double>(n));
    double nearest = 1e30;
    for (int k = 0; k < (1 << bits); ++k) nearest = std::min(nearest, std::fabs(y - c[k]));
    err2 += nearest * nearest;
  }
  return 2 * norm * (1 + 2 * std::ldexp(1.0, -11)) * std::sqrt(err2) * (1 + 1e-4) + 1e-6 * norm;
}

// Worst-case |x - dequant(x)| for one value, derived from each format's definition (not from the
// implementation): half a quantization step plus the f16 rounding of scales and zero points.
double error_bound(const Format& f, std::span<const float> row, std::span<const float> group,
                   float x, float fp8_scale) {
  const double u16 = std::ldexp(1.0, -11);    // f16 relative rounding of normal values
  const double sub16 = std::ldexp(1.0, -25);  // f16 absolute rounding of subnormal values
  double lo = group[0], hi = group[0], amax = 0;
  for (float v : group) {
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
    amax = std::max<double>(amax, std::fabs(v));
  }
  const double margin = 1e-6 * (amax + 1e-30);
  switch (f.id()) {
    case FormatId::kF32:
      return 0;
    case FormatId::kF16:
      return std::fabs(x) * u16 + 6e-8;
    case FormatId::kBF16:
      return std::fabs(x) * std::ldexp(1.0, -8);
    case FormatId::kInt8:
    case FormatId::kInt4:
    case FormatId::kInt2:
    case FormatId::kInt8G64:
    case FormatId::kInt8G128:
    case FormatId::kInt4G64:
    case FormatId::kInt4G128:
    case FormatId::kInt2G64:
    case FormatId::kInt2G128:
    case FormatId::kInt8Kivi:
    case FormatId::kInt4Kivi:
    case FormatId::kInt2Kivi: {
      const double levels = (1 << f.info().bits) - 1;
      const double step = (hi - lo) / levels;
      return 0.5 * step * (1 + 4 * u16) + (std::fabs(lo) + levels * step) * u16 +
             (levels + 1) * sub16 + margin;
    }
    case FormatId::kQ8_0: {
      const double d = amax / 127;
      return 0.5 * d + 127 * (d * u16 + sub16) + margin;
    }
    case FormatId::kQ4_0:
      return amax / 8 * (1 + 8 * u16) + 8 * sub16 + margin;  // +8 clamps to 7: one step
    case FormatId::kQ5_0:
      return amax / 16 * (1 + 16 * u16) + 16 * sub16 + margin;  // +16 clamps to 15
    case FormatId::kQ6_0:
      return amax / 32 * (1 + 32 * u16) + 32 * sub16 + margin;  // +32 clamps to 31
    case FormatId::kQ4_1:
    case FormatId::kQ5_1: {
      const double levels = f.id() == FormatId::kQ4_1 ? 15 : 31;
      const double step = (hi - lo) / levels;
      return 0.5 * step + (std::fabs(lo) + levels * step) * u16 + (levels + 1) * sub16 + margin;
    }
    case FormatId::kIq4Nl:
      // Codebook gaps are at most 24 of 127 scale units around a least-squares scale.
      return 0.2 * amax + margin;
    case FormatId::kFp8E4M3:
      return std::fabs(x) * std::ldexp(1.0, -4) + fp8_scale * std::ldexp(1.0, -10);
    case FormatId::kFp8E5M2:
      return std::fabs(x) * std::ldexp(1.0, -3) + fp8_scale * std::ldexp(1.0, -17);
    case FormatId::kMxfp4:  // E2M1 (3 bits of magnitude) at 2^(floor(log2 amax) - 2), max 6
      return mx_error_bound(amax, x, 2, 1, 0, 6.0) + margin;
    case FormatId::kMxfp6E2M3:
      return mx_error_bound(amax, x, 2, 3, 0, 7.5) + margin;
    case FormatId::kMxfp8E4M3:
      return mx_error_bound(amax, x, 8, 3, -6, 448.0) + margin;
    case FormatId::kNvfp4: {
      // Block scale sf ~ amax / 6 / tensor_scale within e4m3's 2^-4: x * 6 / amax lands within
      // 6.4 on E2M1's grid (half step 0.25 |y| at most, saturation 0.4 at most).
      const double unit = amax / 6.0 * (1.0 + std::ldexp(1.0, -4));
      return 0.25 * std::fabs(x) + 0.65 * unit + margin;
    }
    case FormatId::kFp8E4M3PerTokenHead:  // E4M3 at a scale of amax / 448 (saturation: none)
      return std::fabs(x) * std::ldexp(1.0, -4) + amax / 448 * std::ldexp(1.0, -10) + margin;
    case FormatId::kInt8PerTokenHead:  // half a step of s = max(amax / 127, 1e-6)
      return 0.5 * std::max(amax / 127, 1e-6) * (1 + 1e-6) + margin;
    case FormatId::kQ8_0Had:
    case FormatId::kQ4_0Had:
    case FormatId::kQ4_1Had:
    case FormatId::kQ5_0Had:
    case FormatId::kQ5_1Had:
    case FormatId::kIq4NlHad:
    case FormatId::kQ8_0Had64:
    case FormatId::kQ4_0Had64:
    case FormatId::kQ4_1Had64:
    case FormatId::kQ5_0Had64:
    case FormatId::kQ5_1Had64:
    case FormatId::kIq4NlHad64:
    case FormatId::kQ6_0Had:
    case FormatId::kQ6_0Had64: {
      // The rotation is orthonormal: one value's error is at most its unit's L2 error (the row,
      // or a span of it: bounded by the row's), and each rotated value is at most ||x||, with the
      // inner format's error per unit of its block max (q4_0 and q5_0 clamp the top: one step).
      double norm = 0;
      for (float v : row) norm += static_cast<double>(v) * v;
      const Codec c = f.info().codec;
      const double per_max = c == Codec::kHadamardQ8_0   ? 1.0 / 127
                             : c == Codec::kHadamardQ4_0 ? 0.13
                             : c == Codec::kHadamardQ4_1 ? 0.07
                             : c == Codec::kHadamardQ5_0 ? 0.07
                             : c == Codec::kHadamardQ5_1 ? 0.04
                             : c == Codec::kHadamardQ6_0 ? 0.035
                                                         : 0.2;
      return std::sqrt(static_cast<double>(row.size())) * std::sqrt(norm) * per_max + margin;
    }
    case FormatId::kTqFp8:  // E4M3 with no scale: saturates at 448, subnormal step 2^-9
      return std::max(std::fabs(x) - 448.0, 0.0) + std::fabs(x) * std::ldexp(1.0, -4) +
             std::ldexp(1.0, -10);
    case FormatId::kTqInt3:
    case FormatId::kTqInt4: {  // the int bound, the row being the group
      const double levels = (1 << f.info().bits) - 1;
      const double step = std::max((hi - lo) / levels, 1e-8);
      return 0.5 * step * (1 + 4 * u16) + (std::fabs(lo) + levels * step) * u16 +
             (levels + 1) * sub16 + margin;
    }
    case FormatId::kTqMse3:
    case FormatId::kTqMse4:
      return tq_mse_error_bound(f, row);
    case FormatId::kInt4PerTokenHead: {
      // Rotated values r = H (s x) (unnormalized) take codes within a step (max r - min r) / 15
      // (the zero point is whole, and clamping at 15 can cut the top by half a step); the inverse
      // H r / n moves each value by at most the largest of those errors.
      const size_t n = row.size();
      double rlo = 1e300, rhi = -1e300;
      for (size_t j = 0; j < n; ++j) {
        double r = 0;
        for (size_t i = 0; i < n; ++i) {
          r += (std::popcount(i & j) % 2 ? -1.0 : 1.0) *
               vllm_rht_sign(static_cast<int>(n), static_cast<int>(i)) * row[i];
        }
        rlo = std::min(rlo, r);
        rhi = std::max(rhi, r);
      }
      return std::max((rhi - rlo) / 15, 1e-6) * (1 + 1e-4) + margin;
    }
    case FormatId::kSlot:
      break;
  }
  return 0;
}

struct Case {
  const char* format;
  size_t head_dim;
  size_t group;
};

class PackRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(PackRoundTrip, BoundedErrorAndStableCodes) {
  const Case c = GetParam();
  const Format f = Format::parse(c.format);
  for (Distribution dist : {Distribution::kNormal, Distribution::kOutliers, Distribution::kPositive,
                            Distribution::kTiny}) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      const std::vector<float> row =
          random_row(c.head_dim, dist, seed * 977 + static_cast<uint32_t>(c.head_dim));
      float absmax = 0;
      for (float v : row) absmax = std::max(absmax, std::fabs(v));
      PackOptions opt{.group_size = c.group};
      if (f.has_tensor_scale()) opt.fp8_scale = fp8_scale_for_absmax(f, absmax);

      const size_t n_bytes = packed_row_bytes(f, row.size(), c.group);
      std::vector<uint8_t> packed(n_bytes, 0xAB), repacked(n_bytes, 0xCD);
      std::vector<float> restored(row.size(), std::nanf("")), restored2(row.size());
      pack_row(f, row, packed, opt);
      unpack_row(f, packed, restored, opt);

      const size_t group = effective_group_size(f, row.size(), c.group);
      for (size_t i = 0; i < row.size(); ++i) {
        ASSERT_FALSE(std::isnan(restored[i])) << c.format << " value " << i << " not written";
        const size_t g0 = i / group * group;
        const std::span<const float> g(row.data() + g0, std::min(group, row.size() - g0));
        const double bound = error_bound(f, row, g, row[i], opt.fp8_scale);
        ASSERT_LE(std::fabs(static_cast<double>(row[i]) - restored[i]), bound)
            << c.format << " d=" << c.head_dim << " g=" << c.group << " i=" << i << " x=" << row[i]
            << " y=" << restored[i];
      }
      // Codes are exact on re-pack: packing the dequantized row reproduces the bytes.
      // (iq4_nl re-fits a least-squares scale, so only its values are checked for stability.)
      pack_row(f, restored, repacked, opt);
      if (f.id() != FormatId::kIq4Nl && f.id() != FormatId::kIq4NlHad &&
          f.id() != FormatId::kIq4NlHad64) {
        ASSERT_EQ(packed, repacked) << c.format << " d=" << c.head_dim << " seed " << seed;
      } else {
        unpack_row(f, repacked, restored2, opt);
        for (size_t i = 0; i < row.size(); ++i) {
          // iq4_nl_had: the rotated row's iq4_nl error once more.
          const double bound = f.id() == FormatId::kIq4Nl
                                   ? 0.2 * absmax + 1e-12
                                   : error_bound(f, restored, restored, restored[i], opt.fp8_scale);
          ASSERT_LE(std::fabs(restored2[i] - restored[i]), bound);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllFormats, PackRoundTrip,
    ::testing::Values(
        Case{"f32", 64, 32}, Case{"f16", 8, 32}, Case{"f16", 128, 32}, Case{"bf16", 100, 32},
        Case{"int8", 8, 32}, Case{"int8", 128, 32}, Case{"int8", 256, 64}, Case{"int4", 8, 32},
        Case{"int4", 64, 32}, Case{"int4", 128, 32}, Case{"int4", 128, 128}, Case{"int4", 100, 32},
        Case{"int4", 3, 32}, Case{"int2", 8, 32}, Case{"int2", 64, 16}, Case{"int2", 128, 32},
        Case{"int2", 256, 32}, Case{"int2", 72, 32}, Case{"q8_0", 64, 32}, Case{"q8_0", 128, 32},
        Case{"q8_0", 256, 32}, Case{"q4_0", 64, 32}, Case{"q4_0", 128, 32}, Case{"q4_1", 128, 32},
        Case{"q4_1", 256, 32}, Case{"q5_0", 128, 32}, Case{"q5_1", 128, 32}, Case{"q5_1", 96, 32},
        Case{"iq4_nl", 64, 32}, Case{"iq4_nl", 128, 32}, Case{"fp8_e4m3", 8, 32},
        Case{"fp8_e4m3", 128, 32}, Case{"fp8_e5m2", 128, 32}, Case{"fp8_e5m2", 72, 32},
        // Fixed-group ints ignore the plan's group (32 here): one group of 64 / 128, or the row.
        Case{"int8_g64", 128, 32}, Case{"int4_g64", 64, 32}, Case{"int4_g64", 100, 32},
        Case{"int4_g128", 128, 32}, Case{"int4_g128", 8, 32}, Case{"int2_g64", 128, 32},
        Case{"int2_g128", 256, 32}, Case{"int8_g128", 64, 32}, Case{"mxfp4", 32, 32},
        Case{"mxfp4", 128, 32}, Case{"mxfp6_e2m3", 64, 32}, Case{"mxfp6_e2m3", 128, 32},
        Case{"mxfp8_e4m3", 64, 32}, Case{"mxfp8_e4m3", 256, 32}, Case{"nvfp4", 16, 32},
        Case{"nvfp4", 64, 32}, Case{"nvfp4", 128, 32}, Case{"fp8_per_token_head", 8, 32},
        Case{"fp8_per_token_head", 128, 32}, Case{"fp8_per_token_head", 100, 32},
        Case{"int8_per_token_head", 8, 32}, Case{"int8_per_token_head", 64, 32},
        Case{"int8_per_token_head", 100, 32}, Case{"q8_0_had", 64, 32}, Case{"q4_0_had", 32, 32},
        Case{"q4_0_had", 128, 32}, Case{"q4_0_had", 256, 32}, Case{"iq4_nl_had", 128, 32},
        Case{"q4_1_had", 64, 32}, Case{"q5_0_had", 128, 32}, Case{"q5_1_had", 256, 32},
        Case{"q8_0_had64", 64, 32}, Case{"q4_0_had64", 192, 32}, Case{"q4_1_had64", 256, 32},
        Case{"q5_0_had64", 128, 32}, Case{"q5_1_had64", 320, 32}, Case{"iq4_nl_had64", 256, 32},
        Case{"q6_0", 64, 32}, Case{"q6_0", 96, 32}, Case{"q6_0_had", 128, 32},
        Case{"q6_0_had64", 192, 32}),
    [](const auto& info) {
      return std::string(info.param.format) + "_d" + std::to_string(info.param.head_dim) + "_g" +
             std::to_string(info.param.group);
    });

// Rows of every catalogue format that packs rows of head_dim values (group 32; FP8 formats with a
// tensor scale): `n_rows` random rows (every `seed`-th row with outliers) packed with pack_rows.
struct PackedRows {
  Format format;
  size_t head_dim = 0;
  size_t row_bytes = 0;
  PackOptions options;
  std::vector<uint8_t> bytes;
};
template <typename Fn>
void for_each_packed_format(size_t n_rows, std::initializer_list<size_t> head_dims, uint32_t seed,
                            Fn&& fn) {
  for (const KvFormatTraits& traits : format_table()) {
    const Format f(traits.id);
    for (size_t head_dim : head_dims) {
      PackedRows p{f, head_dim, 0, {.group_size = 32}, {}};
      try {
        p.row_bytes = packed_row_bytes(f, head_dim, 32);
      } catch (const Error&) {
        continue;  // this format cannot pack rows of head_dim values
      }
      if (f.has_tensor_scale()) p.options.fp8_scale = 0.37f;
      std::vector<float> rows;
      for (size_t r = 0; r < n_rows; ++r) {
        const std::vector<float> row =
            random_row(head_dim, r % 3 == 0 ? Distribution::kOutliers : Distribution::kNormal,
                       static_cast<uint32_t>(seed * r + 7));
        rows.insert(rows.end(), row.begin(), row.end());
      }
      p.bytes.resize(n_rows * p.row_bytes);
      pack_rows(f, rows.data(), n_rows, head_dim, p.bytes.data(), p.options);
      fn(p);
    }
  }
}

// unpack_rows takes several rows at once (the rotated formats eight at a time, one per vector
// lane): every row must come out with the bits unpack_row gives it alone. 19 rows = two groups of
// eight and a tail of three.
TEST(Pack, ManyRowsUnpackToTheBitsOfOneRowAtATime) {
  constexpr size_t kRows = 19;
  std::vector<std::string> checked;
  for_each_packed_format(kRows, {64u, 128u, 256u}, 31, [&](const PackedRows& p) {
    const size_t d = p.head_dim;
    std::vector<float> together(kRows * d, std::nanf(""));
    unpack_rows(p.format, p.bytes.data(), kRows, d, together.data(), p.options);
    for (size_t r = 0; r < kRows; ++r) {
      std::vector<float> alone(d);
      unpack_row(p.format, std::span(p.bytes).subspan(r * p.row_bytes, p.row_bytes), alone,
                 p.options);
      ASSERT_EQ(std::memcmp(together.data() + r * d, alone.data(), d * sizeof(float)), 0)
          << p.format.name() << " d=" << d << " row " << r;
    }
    checked.push_back(p.format.name() + "/" + std::to_string(d));
  });
  // The lane forms are exercised: every rotated codec at several widths.
  for (const char* name : {"tq_mse3/64", "tq_mse4/128", "q4_0_had/256", "iq4_nl_had/64",
                           "q8_0_had64/128", "q5_1_had/64"}) {
    EXPECT_NE(std::find(checked.begin(), checked.end(), name), checked.end()) << name;
  }
}

// unpack_rows takes vector paths (formats/ggml_rows_avx2.h: f16, bf16, q4_0, q4_1, q8_0; lane
// forms of the rotated codecs): every format's rows must carry the bits of the scalar per-unit math
// (dequantize_row_unit, what the GPU kernels and CPU references run).
TEST(Pack, RowsCarryTheBitsOfTheScalarUnitMath) {
  constexpr size_t kRows = 11;
  int checked = 0;
  for_each_packed_format(kRows, {64u, 128u}, 13, [&](const PackedRows& p) {
    RowFormat rf{};
    if (!make_row_format(static_cast<uint16_t>(p.format.id()), static_cast<int>(p.head_dim), 32,
                         &rf)) {
      return;
    }
    const size_t d = p.head_dim;
    std::vector<float> fast(kRows * d), scalar(kRows * d);
    unpack_rows(p.format, p.bytes.data(), kRows, d, fast.data(), p.options);
    for (size_t r = 0; r < kRows; ++r) {
      for (int u = 0; u < rf.n_units; ++u) {
        dequantize_row_unit(rf, p.bytes.data() + r * p.row_bytes, u, scalar.data() + r * d,
                            p.options.fp8_scale);
      }
    }
    ASSERT_EQ(std::memcmp(fast.data(), scalar.data(), fast.size() * sizeof(float)), 0)
        << p.format.name() << " d=" << d;
    ++checked;
  });
  EXPECT_GT(checked, 40);
}

// Unpacking in the rotated domain (what a decode step's attention reads) and rotating each span
// back gives unpack_rows' bits, for every format with a rotation_span, one row and eight at a time;
// formats without one ignore the option.
TEST(Pack, RotatedDomainRowsRotateBackToTheUnpackedBits) {
  constexpr size_t kRows = 19;
  std::vector<std::string> rotated;
  for_each_packed_format(kRows, {64u, 128u, 256u}, 17, [&](const PackedRows& p) {
    const size_t d = p.head_dim;
    std::vector<float> plain(kRows * d), in_domain(kRows * d);
    unpack_rows(p.format, p.bytes.data(), kRows, d, plain.data(), p.options);
    PackOptions domain = p.options;
    domain.rotated_domain = true;
    unpack_rows(p.format, p.bytes.data(), kRows, d, in_domain.data(), domain);
    const int span = rotation_span(p.format, d);
    if (span > 0) {
      EXPECT_NE(std::memcmp(plain.data(), in_domain.data(), plain.size() * sizeof(float)), 0)
          << p.format.name() << ": the rotated domain is not the row domain";
      for (size_t r = 0; r < kRows; ++r) {
        hadamard_transform_spans(in_domain.data() + r * d, static_cast<int>(d), span);
      }
      rotated.push_back(p.format.name() + "/" + std::to_string(span));
    }
    ASSERT_EQ(std::memcmp(plain.data(), in_domain.data(), plain.size() * sizeof(float)), 0)
        << p.format.name() << " d=" << d;
  });
  for (const char* name : {"tq_mse3/64", "tq_mse4/128", "q4_0_had/256", "iq4_nl_had/64",
                           "q8_0_had64/64", "q5_1_had/128"}) {
    EXPECT_NE(std::find(rotated.begin(), rotated.end(), name), rotated.end()) << name;
  }
  // Rotations a reader cannot undo with the plain Hadamard transform have no rotated domain.
  EXPECT_EQ(rotation_span(Format::parse("int4_per_token_head"), 128), 0);
  EXPECT_EQ(rotation_span(Format::parse("q4_0"), 128), 0);
}

TEST(Pack, IntCodesAreLittleEndianBitPackedFirstValueLowest) {
  // Group of 4 values 0, 1, 2, 3 with int2: scale 1, zero 0, codes 0,1,2,3 -> 0b11'10'01'00.
  const std::vector<float> row = {0.0f, 1.0f, 2.0f, 3.0f};
  std::vector<uint8_t> out(packed_row_bytes(Format(FormatId::kInt2), 4, 32));
  pack_row(Format(FormatId::kInt2), row, out, {});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0] | (out[1] << 8), 0x3c00);  // f16 1.0
  EXPECT_EQ(out[2] | (out[3] << 8), 0x0000);  // f16 0.0
  EXPECT_EQ(out[4], 0b11100100);
  // int4: two values per byte, the first in the low nibble.
  std::vector<float> row4 = {0, 15, 3, 7};
  std::vector<uint8_t> out4(packed_row_bytes(Format(FormatId::kInt4), 4, 32));
  pack_row(Format(FormatId::kInt4), row4, out4, {});
  EXPECT_EQ(out4[4], 0xF0);
  EXPECT_EQ(out4[5], 0x73);
}

TEST(Pack, ConstantRowsAndZerosDoNotDivideByZero) {
  for (const char* name : {"int8",
                           "int4",
                           "int2",
                           "q8_0",
                           "q4_0",
                           "q4_1",
                           "q5_0",
                           "q5_1",
                           "iq4_nl",
                           "mxfp4",
                           "mxfp6_e2m3",
                           "mxfp8_e4m3",
                           "nvfp4",
                           "fp8_per_token_head",
                           "int8_per_token_head",
                           "q8_0_had",
                           "q4_0_had",
                           "iq4_nl_had",
                           "q4_1_had",
                           "q5_0_had",
                           "q5_1_had",
                           "q8_0_had64",
                           "q4_0_had64",
                           "q4_1_had64",
                           "q5_0_had64",
                           "q5_1_had64",
                           "iq4_nl_had64",
                           "q6_0",
                           "q6_0_had",
                           "q6_0_had64"}) {
    const Format f = Format::parse(name);
    for (float value : {0.0f, 2.5f, -1.0f}) {
      std::vector<float> row(64, value), back(64, std::nanf(""));
      std::vector<uint8_t> bytes(packed_row_bytes(f, 64, 32));
      pack_row(f, row, bytes, {});
      unpack_row(f, bytes, back, {});
      for (float v : back) {
        ASSERT_TRUE(std::isfinite(v)) << name;
        // Small-float elements hold 2.5 only to their grid (E2M1: 2 or 3 around it); iq4_nl has
        // no zero, so a rotated constant row's zeros come back as its smallest entry.
        const double tolerance = f.info().rotated() ? error_bound(f, row, row, value, 1.0f)
                                 : f.family() == FormatFamily::kMicroscaled
                                     ? 0.25 * std::fabs(value)
                                     : std::fabs(value) * 1e-3 + 1e-6;
        ASSERT_NEAR(v, value, tolerance) << name << " constant " << value;
      }
    }
  }
}

TEST(Pack, KiviPerChannelGroups) {
  // [32 tokens, 128 channels] with a padded token stride: each channel's 32 tokens form one row.
  const size_t tokens = 32, channels = 128, stride = 136;
  std::vector<float> k(tokens * stride, 0.0f);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t c = 0; c < channels; ++c)
      k[t * stride + c] = normal(rng) * (1.0f + static_cast<float>(c % 7));
  }
  for (const char* name : {"int8", "int4", "int2", "q4_0", "q8_0"}) {
    const Format f = Format::parse(name);
    const size_t row_bytes = packed_row_bytes(f, tokens, tokens);
    std::vector<uint8_t> packed(row_bytes * channels);
    pack_channels(f, k.data(), tokens, channels, stride, packed, {});
    // Independent check: channel c's bytes equal pack_row over that channel's column.
    for (size_t c : {size_t{0}, size_t{5}, size_t{127}}) {
      std::vector<float> column(tokens);
      for (size_t t = 0; t < tokens; ++t) column[t] = k[t * stride + c];
      std::vector<uint8_t> expected(row_bytes);
      pack_row(f, column, expected, {.group_size = tokens});
      EXPECT_TRUE(std::equal(expected.begin(), expected.end(), packed.begin() + c * row_bytes))
          << name;
    }
    std::vector<float> back(tokens * stride, std::nanf(""));
    unpack_channels(f, packed, tokens, channels, back.data(), stride, {});
    for (size_t t = 0; t < tokens; ++t) {
      for (size_t c = 0; c < channels; ++c) {
        const float x = k[t * stride + c], y = back[t * stride + c];
        ASSERT_TRUE(std::isfinite(y));
        const float scale = 1.0f + static_cast<float>(c % 7);
        ASSERT_LE(std::fabs(x - y), 4.5f * scale) << name;
      }
      for (size_t c = channels; c < stride; ++c) ASSERT_TRUE(std::isnan(back[t * stride + c]));
    }
    // Same bits as unpacking each channel alone (int channels go eight at a time, transposed).
    for (size_t c = 0; c < channels; ++c) {
      std::vector<float> column(tokens);
      unpack_row(f, std::span(packed).subspan(c * row_bytes, row_bytes), column,
                 {.group_size = tokens});
      for (size_t t = 0; t < tokens; ++t) {
        ASSERT_EQ(std::bit_cast<uint32_t>(column[t]), std::bit_cast<uint32_t>(back[t * stride + c]))
            << name << " channel " << c << " token " << t;
      }
    }
  }
}

TEST(Pack, WrongBufferSizesAndBadScalesAreRefused) {
  std::vector<float> row(64, 1.0f);
  std::vector<uint8_t> small(10);
  EXPECT_THROW(pack_row(Format(FormatId::kQ8_0), row, small, {}), Error);
  EXPECT_THROW(unpack_row(Format(FormatId::kInt4), small, row, {}), Error);
  std::vector<uint8_t> fp8(64);
  EXPECT_THROW(pack_row(Format(FormatId::kFp8E4M3), row, fp8, {.fp8_scale = 0.0f}), Error);
  EXPECT_THROW(pack_row(Format(FormatId::kFp8E4M3), row, fp8, {.fp8_scale = NAN}), Error);
  std::vector<uint8_t> q(packed_row_bytes(Format(FormatId::kQ4_0), 64, 32));
  std::vector<float> short_row(8, 1.0f);
  EXPECT_THROW(pack_row(Format(FormatId::kQ4_0), short_row, q, {}), Error);
}

}  // namespace
}  // namespace kvplan
