// vLLM TurboQuant rows (tq_fp8, tq_mse3/4, tq_int3/4): byte identity with vLLM's own store kernel
// (data/turboquant_golden.json, written by scripts/fixtures/vllm-reference.sh, which runs vLLM
// 0.34.0's triton_turboquant_store.py on the CPU with Triton's interpreter), vLLM's codebooks
// re-solved here, and values worked by hand.
#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/kv_format_math.h"
#include "formats/pack.h"
#include "hex.h"

namespace kvplan {
namespace {

using test::to_hex;

std::vector<float> floats_of(const nlohmann::json& bits) {
  return test::floats_from_bits(bits.get<std::vector<uint32_t>>());
}

std::vector<uint8_t> packed(const Format& f, const std::vector<float>& row) {
  std::vector<uint8_t> out(packed_row_bytes(f, row.size(), 32));
  pack_row(f, row, out, {});
  return out;
}

// The rotated unit row in doubles: y_j = sum_i H_ij x_i / (|x| sqrt(n)), H the Sylvester Hadamard
// matrix (H_ij = -1 when i & j has an odd number of bits).
std::vector<double> rotated_unit_row(const std::vector<float>& x) {
  double norm = 0;
  for (float v : x) norm += static_cast<double>(v) * v;
  norm = std::sqrt(norm);
  std::vector<double> y(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    for (size_t i = 0; i < x.size(); ++i) y[j] += (std::popcount(i & j) % 2 ? -1.0 : 1.0) * x[i];
    y[j] /= norm * std::sqrt(static_cast<double>(x.size()));
  }
  return y;
}

// vLLM rotates keys with a GEMM (torch's f32 matmul here), kvplan with butterflies: a code may
// differ only where the rotated value is a tie, within float rounding of the midpoint between
// the two codes. Returns how many codes differ; fails the test on any other difference.
int compare_key_codes(const Format& f, const std::vector<float>& x, const std::vector<uint8_t>& got,
                      const std::vector<uint8_t>& want, const std::string& what) {
  const int n = static_cast<int>(x.size()), bits = f.info().bits;
  const float* c = bits == 3 ? tq_centroids<3>(n) : tq_centroids<4>(n);
  const std::vector<double> y = rotated_unit_row(x);
  int ties = 0;
  for (int i = 0; i < n; ++i) {
    const int a = tq_code(got.data(), i, bits), b = tq_code(want.data(), i, bits);
    if (a == b) continue;
    ++ties;
    const int upper = std::max(a, b);
    const double mid = (c[upper - 1] + c[upper]) / 2.0f;
    EXPECT_TRUE(std::abs(a - b) == 1 && std::abs(y[i] - mid) < 1e-6)
        << what << ": code " << i << " is " << a << ", vLLM's " << b << " (rotated " << y[i]
        << ", midpoint " << mid << ")";
  }
  const size_t code_bytes = static_cast<size_t>(n * bits / 8);
  EXPECT_EQ(to_hex({got.begin() + code_bytes, got.end()}),
            to_hex({want.begin() + code_bytes, want.begin() + got.size()}))
      << what << ": the f16 norm";
  return ties;
}

TEST(TurboQuant, SlotsAreByteIdenticalToVllmsStoreKernel) {
  std::ifstream in(std::string(KVPLAN_SOURCE_DIR) + "/tests/formats/data/turboquant_golden.json");
  ASSERT_TRUE(in) << "missing tests/formats/data/turboquant_golden.json";
  const nlohmann::json golden = nlohmann::json::parse(in);
  int checked = 0, exact = 0, ties = 0;
  for (const auto& c : golden["cases"]) {
    const std::vector<float> k = floats_of(c["key_f32_bits"]);
    const std::vector<float> v = floats_of(c["value_f32_bits"]);
    for (const auto& [preset, s] : c["slots"].items()) {
      const std::string what = fmt::format("{}, head_dim {}, {}", preset, c["head_dim"].get<int>(),
                                           c["rows"].get<std::string>());
      const Format kf = Format::parse(s["key_format"].get<std::string>());
      const Format vf = Format::parse(s["value_format"].get<std::string>());
      // vLLM's slot: [key row | value row], padded to an even size.
      std::vector<uint8_t> slot = packed(kf, k);
      const size_t key_bytes = slot.size();
      const std::vector<uint8_t> vb = packed(vf, v);
      slot.insert(slot.end(), vb.begin(), vb.end());
      if (slot.size() % 2 != 0) slot.push_back(0);
      const std::string want_hex = s["slot"].get<std::string>();
      ++checked;
      if (to_hex(slot) == want_hex) {
        ++exact;
        continue;
      }
      std::vector<uint8_t> want;
      for (size_t i = 0; i + 1 < want_hex.size(); i += 2) {
        want.push_back(static_cast<uint8_t>(std::stoi(want_hex.substr(i, 2), nullptr, 16)));
      }
      ASSERT_EQ(want.size(), slot.size()) << what;
      EXPECT_EQ(to_hex({slot.begin() + key_bytes, slot.end()}),
                to_hex({want.begin() + key_bytes, want.end()}))
          << what << ": the value row";
      if (kf.info().rotated()) {
        ties += compare_key_codes(kf, k, {slot.begin(), slot.begin() + key_bytes},
                                  {want.begin(), want.begin() + key_bytes}, what);
      } else {
        ADD_FAILURE() << what << ": key bytes differ";
      }
    }
  }
  // head_dim 8 ... 512, six rows, four presets, less k8v4's keys beyond E4M3's range (7 rows).
  EXPECT_EQ(checked, 7 * 6 * 4 - 7);
  // Ties come from rows whose rotation has exact zeros (the ramp); random rows match exactly.
  EXPECT_GE(exact, checked - 7 * 3);
  std::printf("%d of %d slots byte-identical; %d key codes at rotation ties\n", exact, checked,
              ties);
}

// E4M3 keys saturate (the GPU's cvt.rn.satfinite): beyond +-448 they store +-448 (0x7e / 0xfe),
// not NaN; 464 (halfway to the next step, 480) rounds to even, 448.
TEST(TurboQuant, Fp8KeysSaturate) {
  const std::vector<uint8_t> r =
      packed(Format(FormatId::kTqFp8), {448.0f, 464.0f, 1e6f, -641.0f, 0.4943f, -0.25f, 0, 1});
  EXPECT_EQ(to_hex(r), "7e7e7efe30a80038");
}

// An independent solve of vLLM's Lloyd-Max problem (turboquant/centroids.py, in doubles): 2^bits
// levels for N(0, 1/d), starting evenly spaced over +-3.5 sigma; each step sets every centroid to
// the mean of the density between its neighbours' midpoints (the outer edges at +-10.5 sigma),
// integrated by the trapezoid rule on 200 intervals; it stops, keeping the centroids it had, once
// no centroid moves by 1e-10, or after 200 steps.
std::vector<float> solve_lloyd_max(int d, int bits) {
  const int levels = 1 << bits;
  const double sigma2 = 1.0 / d;
  const double sigma = std::sqrt(sigma2);
  const auto pdf = [&](double x) {
    return (1.0 / std::sqrt(2 * M_PI * sigma2)) * std::exp(-x * x / (2 * sigma2));
  };
  const auto trapezoid = [](auto f, double a, double b) {
    const int n = 200;
    const double h = (b - a) / n;
    double sum = 0.5 * (f(a) + f(b));
    for (int i = 1; i < n; ++i) sum += f(a + i * h);
    return sum * h;
  };
  const double lo = -3.5 * sigma, hi = 3.5 * sigma;
  std::vector<double> c(levels);
  for (int i = 0; i < levels; ++i) c[i] = lo + (hi - lo) * (i + 0.5) / levels;
  for (int step = 0; step < 200; ++step) {
    std::vector<double> edges{lo * 3};
    for (int i = 0; i + 1 < levels; ++i) edges.push_back((c[i] + c[i + 1]) / 2.0);
    edges.push_back(hi * 3);
    std::vector<double> next(levels);
    double moved = 0;
    for (int i = 0; i < levels; ++i) {
      const double num = trapezoid([&](double x) { return x * pdf(x); }, edges[i], edges[i + 1]);
      const double den = trapezoid(pdf, edges[i], edges[i + 1]);
      next[i] = den > 1e-15 ? num / den : c[i];
      moved = std::max(moved, std::abs(next[i] - c[i]));
    }
    if (moved < 1e-10) break;
    c = next;
  }
  return {c.begin(), c.end()};
}

TEST(TurboQuant, CodebooksAreVllmsLloydMaxSolutions) {
  for (int slot = 0, d = kMinTabulatedRow; d <= kMaxRotatedRow; ++slot, d *= 2) {
    const std::vector<float> c3 = solve_lloyd_max(d, 3), c4 = solve_lloyd_max(d, 4);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(c3[i], kTqCentroids3[slot][i]) << "d " << d << " i " << i;
    for (int i = 0; i < 16; ++i)
      EXPECT_EQ(c4[i], kTqCentroids4[slot][i]) << "d " << d << " i " << i;
    EXPECT_EQ(tq_centroids<4>(d), kTqCentroids4[slot]);
  }
  // The optimal 8- and 16-level Gaussian quantizers are known in units of sigma
  // (Max 1960): outermost 8-level centroid 2.152, 16-level 2.733.
  EXPECT_NEAR(kTqCentroids3[3][7] * 8.0, 2.152, 2e-3);  // d = 64: sigma = 1/8
  EXPECT_NEAR(kTqCentroids4[3][15] * 8.0, 2.733, 3e-3);
}

// Worked by hand: head_dim 8 values 0..7 at 3 bits: scale = 7/7 = 1, min 0, codes 0..7; 4 bits:
// scale 7/15, codes round(x * 15/7) = 0, 2, 4, 6, 9, 11, 13, 15.
TEST(TurboQuant, ValueRowsByHand) {
  const std::vector<float> x{0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<uint8_t> r3 = packed(Format(FormatId::kTqInt3), x);
  ASSERT_EQ(r3.size(), 3u + 4u);
  // Codes 0..7 at bits 3i of a 24-bit little-endian word: 0b111'110'101'100'011'010'001'000.
  EXPECT_EQ(to_hex(r3),
            "88c6fa"
            "003c"
            "0000");  // scale f16 1.0 = 0x3c00, min 0
  const std::vector<uint8_t> r4 = packed(Format(FormatId::kTqInt4), x);
  ASSERT_EQ(r4.size(), 4u + 4u);
  EXPECT_EQ(to_hex({r4.begin(), r4.begin() + 4}), "2064b9fd");
  std::vector<float> y(8);
  unpack_row(Format(FormatId::kTqInt3), r3, y, {});
  EXPECT_EQ(y, x);
}

// Keys at head_dim 8: a row along the first Hadamard column rotates to (|x|, 0, ..., 0) / |x|
// = e_0; e_0's coordinates take codes: 1 -> the top centroid (7 at 3 bits), 0 -> the upper of the
// two middle centroids (the midpoint between them is exactly 0 and ties go up: 4).
TEST(TurboQuant, KeyRowsByHand) {
  const std::vector<float> x(8, 0.5f);  // |x| = sqrt(2)
  const std::vector<uint8_t> r = packed(Format(FormatId::kTqMse3), x);
  ASSERT_EQ(r.size(), 3u + 2u);
  uint8_t expected[3];
  tq_pack_codes(8, 3, expected, [](int i) { return i == 0 ? 7u : 4u; });
  EXPECT_EQ(to_hex({r.begin(), r.begin() + 3}), to_hex({expected, expected + 3}));
  EXPECT_EQ(load_u16_le(r.data() + 3), f32_to_f16(std::sqrt(2.0f)));
  // Dequantized: the unit vector of the chosen centroids, times the norm, rotated back.
  std::vector<float> y(8);
  unpack_row(Format(FormatId::kTqMse3), r, y, {});
  const float* c = kTqCentroids3[0];
  const float len = std::sqrt(c[7] * c[7] + 7 * c[4] * c[4]);
  const float norm = f16_to_f32(f32_to_f16(std::sqrt(2.0f)));
  for (int i = 0; i < 8; ++i) {
    const float expected_y = norm * ((c[7] + (i == 0 ? 7 : -1) * c[4]) / len) / std::sqrt(8.0f);
    EXPECT_NEAR(y[i], expected_y, 1e-5f) << i;
  }
}

TEST(TurboQuant, RowsThatCannotBePackedAreRefused) {
  EXPECT_THROW((void)packed_row_bytes(Format(FormatId::kTqMse4), 96, 32), Error);  // not 2^k
  EXPECT_THROW((void)packed_row_bytes(Format(FormatId::kTqMse4), 4, 32), Error);   // below 8
  EXPECT_THROW((void)packed_row_bytes(Format(FormatId::kTqInt3), 12, 32), Error);  // 3-bit: x8
  EXPECT_EQ(packed_row_bytes(Format(FormatId::kTqInt4), 96, 32), 48u + 4u);
  EXPECT_EQ(packed_row_bytes(Format(FormatId::kTqMse3), 128, 32), 48u + 2u);
  EXPECT_EQ(packed_row_bytes(Format(FormatId::kTqFp8), 128, 32), 128u);
}

}  // namespace
}  // namespace kvplan
