// profile_summary: the summary `kvplan profile` prints, on the committed stories260K profile (its
// numbers checked against the summary functions they come from), and its JSON's keys and order.
#include "profile/profile_summary.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/json_text.h"
#include "profile/dkl_estimate.h"

namespace kvplan {
namespace {

Profile committed_stories_profile() {
  return read_profile(std::filesystem::path(KVPLAN_SOURCE_DIR) / "data" / "reference" /
                      "stories260k" / "profile.json");
}

std::vector<std::string> keys_of(const nlohmann::ordered_json& j) {
  std::vector<std::string> out;
  for (const auto& [key, value] : j.items()) out.push_back(key);
  return out;
}

TEST(ProfileSummary, CommittedProfileSummary) {
  const Profile p = committed_stories_profile();
  const ProfileSummary s = summarize_profile(p);
  EXPECT_EQ(s.output_cells, 170u);
  EXPECT_EQ(s.total_cells, 170u);
  EXPECT_TRUE(s.complete);
  // The side catalogue measures dKL on int4 keys, int4 values and KV4 in each of 5 layers.
  EXPECT_EQ(s.dkl_measured_cells, 15u);
  EXPECT_EQ(s.monotonicity_violations, "");
  ASSERT_EQ(s.key_value_ratios.size(), 4u);
  const char* names[] = {"dkl_int4", "dkl_int2", "e_o_int4", "e_o_int2"};
  for (size_t i = 0; i < 4; ++i) {
    const KeyValueRatio& r = s.key_value_ratios[i];
    EXPECT_EQ(r.name(), names[i]);
    EXPECT_EQ(r.ratio, key_value_sensitivity_ratio(p, r.metric, "int8", r.low_format));
  }
  ASSERT_TRUE(s.additivity.has_value());
  const ModelCheck a = additivity_check(p);
  EXPECT_EQ(s.additivity->cells, a.cells);
  EXPECT_EQ(s.additivity->cells, 5);
  EXPECT_EQ(s.additivity->worst_layer, a.worst_layer);
  EXPECT_EQ(s.additivity->worst_pair, "KV4");
  EXPECT_EQ(s.additivity->mean_abs_rel_error, a.mean_abs_rel_error);
  EXPECT_EQ(s.timings, p.timings);
}

TEST(ProfileSummary, JsonKeysInTheirOrder) {
  const ProfileSummary s = summarize_profile(committed_stories_profile());
  const nlohmann::ordered_json j = profile_summary_to_json(s);
  EXPECT_EQ(keys_of(j),
            (std::vector<std::string>{"output_cells", "total_cells", "complete", "key_value_ratio",
                                      "additivity", "dkl_measured_cells", "monotonic_kv8_kv4_kv2",
                                      "timings"}));
  EXPECT_EQ(keys_of(j["key_value_ratio"]),
            (std::vector<std::string>{"dkl_int4", "dkl_int2", "e_o_int4", "e_o_int2"}));
  EXPECT_EQ(j["key_value_ratio"]["dkl_int2"].get<double>(), s.key_value_ratios[1].ratio);
  EXPECT_EQ(keys_of(j["additivity"]),
            (std::vector<std::string>{"joint_cells", "mean_abs_rel_error", "max_abs_rel_error",
                                      "worst_layer", "worst_pair"}));
  EXPECT_EQ(json_text(j["timings"], -1), json_text(timings_to_json(s.timings), -1));

  // Without the pairs, the checks and the ratios are left out; violations are listed.
  ProfileSummary bare;
  bare.output_cells = 3;
  bare.total_cells = 6;
  bare.monotonicity_violations = "layer 1 e_a";
  EXPECT_EQ(json_text(profile_summary_to_json(bare), -1),
            R"({"output_cells":3,"total_cells":6,"complete":false,"dkl_measured_cells":0,)"
            R"("monotonic_kv8_kv4_kv2":false,"monotonicity_violations":"layer 1 e_a",)"
            R"("timings":{}})");
}

}  // namespace
}  // namespace kvplan
