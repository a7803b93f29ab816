// Per-(layer, KV head) FP8 scales: calibrated from absmax, checked when read, and what they buy:
// activations above e4m3's 448 survive, and small ones keep their precision.
#include "formats/fp8_scales.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/pack.h"

namespace kvplan {
namespace {

std::string error_of(const KvHeadScales& s, const char* pair, int heads) {
  try {
    check_fp8_scales(s, KvPair::parse(pair), heads, "plan.json: layers[3]");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Fp8Scales, CalibratedPerHeadOnFp8SidesOnly) {
  const KvHeadAbsmax absmax{{896.0f, 4.48f}, {57344.0f * 2, 0.0f}};
  const KvHeadScales s = fp8_scales_for(KvPair::parse("fp8_e4m3/fp8_e5m2"), absmax);
  ASSERT_EQ(s.key.size(), 2u);
  EXPECT_FLOAT_EQ(s.key_scale(0), 2.0f);    // 896 / 448
  EXPECT_FLOAT_EQ(s.key_scale(1), 0.01f);   // 4.48 / 448
  EXPECT_FLOAT_EQ(s.value_scale(0), 2.0f);  // 114688 / 57344
  EXPECT_FLOAT_EQ(s.value_scale(1), 1.0f);  // a head that was all zeros keeps 1
  const KvHeadScales q = fp8_scales_for(KvPair::parse("fp8_e4m3/q4_0"), absmax);
  EXPECT_EQ(q.key.size(), 2u);
  EXPECT_TRUE(q.value.empty());
  EXPECT_FLOAT_EQ(q.value_scale(1), 1.0f);
  EXPECT_TRUE(fp8_scales_for(KvPair::parse("q8_0/q4_0"), {}).empty());
  EXPECT_THROW((void)fp8_scales_for(KvPair::parse("fp8_e4m3/q4_0"), {}), Error);
}

TEST(Fp8Scales, BadScalesNameTheSideAndTheProblem) {
  EXPECT_EQ(error_of({{1.0f, 2.0f}, {}}, "fp8_e4m3/q4_0", 2), "");
  EXPECT_NE(error_of({{1.0f}, {}}, "fp8_e4m3/q4_0", 2).find("key_fp8_scales has 1 entries"),
            std::string::npos);
  EXPECT_NE(error_of({{}, {1.0f, 1.0f}}, "fp8_e4m3/q4_0", 2).find("keeps no per-head scale"),
            std::string::npos);
  EXPECT_NE(error_of({{1.0f, -1.0f}, {}}, "fp8_e4m3/q4_0", 2).find("key_fp8_scales[1]"),
            std::string::npos);
  EXPECT_NE(error_of({{1.0f, NAN}, {}}, "fp8_e4m3/q4_0", 2).find("finite"), std::string::npos);
  EXPECT_NE(error_of({{1.0f}, {}}, "fp8_e4m3/q4_0", 2).find("plan.json: layers[3]"),
            std::string::npos);
}

// Round-trip relative error of one row under a scale.
double roundtrip_error(Format f, const std::vector<float>& row, float scale) {
  std::vector<uint8_t> bytes(packed_row_bytes(f, row.size(), 32));
  std::vector<float> back(row.size());
  const PackOptions opt{.group_size = 32, .fp8_scale = scale};
  pack_row(f, row, bytes, opt);
  unpack_row(f, bytes, back, opt);
  double err = 0, ref = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    err += (double(row[i]) - back[i]) * (double(row[i]) - back[i]);
    ref += double(row[i]) * row[i];
  }
  return std::sqrt(err / ref);
}

TEST(Fp8Scales, CalibratedScalesBeatScaleOneOutsideE4m3sComfortZone) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  const Format e4m3 = Format::parse("fp8_e4m3");
  for (const float magnitude : {2000.0f, 0.001f}) {  // saturates at 448 / falls into subnormals
    std::vector<float> row(64);
    float absmax = 0;
    for (float& x : row) {
      x = normal(rng) * magnitude;
      absmax = std::max(absmax, std::fabs(x));
    }
    const float scale = fp8_head_scales(e4m3, {absmax})[0];
    const double calibrated = roundtrip_error(e4m3, row, scale);
    EXPECT_LT(calibrated, 0.05) << magnitude;
    EXPECT_GT(roundtrip_error(e4m3, row, 1.0f), 2 * calibrated) << magnitude;
  }
}

}  // namespace
}  // namespace kvplan
