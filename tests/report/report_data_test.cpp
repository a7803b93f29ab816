#include "report/report_data.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "report/html_report.h"
#include "report/markdown_report.h"
#include "report/report_fixtures.h"

namespace kvplan::test {
namespace {

using report::ReportData;

TEST(ReportData, HeatmapsAndLayersComeFromTheProfile) {
  const ReportData d = tiny_report();
  ASSERT_EQ(d.dkl.values.size(), 2u);
  EXPECT_EQ(d.dkl.candidates, (std::vector<std::string>{"KV8", "K8V4", "KV4"}));
  EXPECT_DOUBLE_EQ(d.dkl.values[1][2], 0.4);
  EXPECT_DOUBLE_EQ(d.e_o.values[1][2], 4.0);
  ASSERT_EQ(d.layers.size(), 2u);
  EXPECT_EQ(d.layers[1].pair.name(), "KV4");
  EXPECT_DOUBLE_EQ(*d.layers[1].dkl, 0.4);
  EXPECT_DOUBLE_EQ(d.layers[0].key_bytes_per_token, 36);
  EXPECT_DOUBLE_EQ(d.layers[1].value_bytes_per_token, 20);
  EXPECT_DOUBLE_EQ(*d.layers[0].surrogate_weight, 2.0);
}

TEST(ReportData, UniformBaselinesArePredictedWithThePlansSurrogate) {
  const ReportData d = tiny_report();
  ASSERT_EQ(d.baselines.size(), 2u);
  // KV8: 2 x 1e-4 + 0.5 x 2e-4; KV4: 2 x 0.1 + 0.5 x 0.4.
  EXPECT_NEAR(*d.baselines[0].predicted_error, 3e-4, 1e-15);
  EXPECT_NEAR(*d.baselines[1].predicted_error, 0.4, 1e-15);
  EXPECT_DOUBLE_EQ(d.baselines[1].memory, 4.0);
  ASSERT_EQ(d.front.size(), 2u);
  EXPECT_FALSE(d.front[0].mean_kl.has_value());
  EXPECT_DOUBLE_EQ(*d.front[1].mean_kl, 0.05);
  ASSERT_EQ(d.validations.size(), 1u);
  EXPECT_TRUE(d.warnings.empty());
}

TEST(ReportData, MemoryTableMatchesSizesWorkedOutByHand) {
  report::MemoryOptions m;
  m.gpu_memory_bytes = 1 << 20;  // 1 MiB
  m.contexts = {4096};
  const ReportData d = tiny_report(m);
  ASSERT_GE(d.memory_rows.size(), 3u);
  const report::MemoryRow& plan = d.memory_rows[0];
  EXPECT_TRUE(plan.is_plan);
  EXPECT_DOUBLE_EQ(plan.bytes_per_token, 112);
  EXPECT_DOUBLE_EQ(plan.equivalent_bits, 6);
  EXPECT_NEAR(plan.compression_vs_bf16, 256.0 / 112.0, 1e-12);
  EXPECT_EQ(plan.bytes_per_sequence[0], 4096u * 112u);
  EXPECT_EQ(plan.sequences_that_fit[0], 2);  // 1 MiB / 458,752 B
  // Pages of 32 tokens cost 32 x 112 = 3,584 B: 292 whole pages fit in 1 MiB.
  EXPECT_EQ(plan.longest_context, 292 * 32);
  const report::MemoryRow& bf16 = d.memory_rows[1];
  EXPECT_DOUBLE_EQ(bf16.bytes_per_token, 256);
  EXPECT_DOUBLE_EQ(bf16.compression_vs_bf16, 1.0);
  EXPECT_EQ(d.memory_rows[2].label, "KV8");
  EXPECT_DOUBLE_EQ(d.memory_rows[2].bytes_per_token, 144);
}

// A sliding-window layer holds its window of each sequence: the memory section says which layers,
// and the bytes per sequence count min(context, window) tokens on them.
TEST(ReportData, SlidingWindowLayersHoldTheirWindow) {
  report::MemoryOptions m;
  m.gpu_memory_bytes = 1 << 20;
  m.contexts = {4096};
  const Profile profile = tiny_profile();
  Plan plan = tiny_plan(profile);
  plan.model.geometry.layers[0].sliding_window = 512;
  const ReportData d = report::build_report_data({profile, "profile.json"}, {plan, "plan.json"}, m);
  EXPECT_EQ(
      d.sliding_window_note.rfind("1 of 2 layers (0) attend over a 512-token sliding window", 0),
      0u)
      << d.sliding_window_note;
  const report::MemoryRow& windowed = d.memory_rows[0];
  const ReportData full = tiny_report(m);
  EXPECT_TRUE(full.sliding_window_note.empty());
  // Layer 0 keeps 512 of the 4,096 tokens; layer 1 all of them.
  const uint64_t layer0 =
      static_cast<uint64_t>(d.layers[0].key_bytes_per_token + d.layers[0].value_bytes_per_token);
  EXPECT_EQ(full.memory_rows[0].bytes_per_sequence[0] - windowed.bytes_per_sequence[0],
            (4096u - 512u) * layer0);
}

std::string error_of(const Profile& profile, const Plan& plan, report::MemoryOptions m = {}) {
  try {
    (void)report::build_report_data({profile, "p.json"}, {plan, "q.json"}, m);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

// The error plan_from_json gives for plan JSON `j`, "" when it loads.
std::string plan_error(const nlohmann::json& j) {
  try {
    (void)plan_from_json(j, "q.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

TEST(ReportData, RefusesAPlanForAnotherModel) {
  const Profile profile = tiny_profile();
  Plan plan = tiny_plan(profile);
  plan.model.fingerprint = "ffffffffffffffff";
  const std::string e = error_of(profile, plan);
  EXPECT_NE(e.find("q.json"), std::string::npos) << e;
  EXPECT_NE(e.find("fingerprint"), std::string::npos) << e;
  EXPECT_NE(e.find("00112233aabbccdd"), std::string::npos) << e;
}

TEST(ReportData, RefusesAnIncompleteProfileNamingIt) {
  Profile profile = tiny_profile();
  const Plan plan = tiny_plan(profile);
  profile.cells[1][2].reset();
  const std::string e = error_of(profile, plan);
  EXPECT_NE(e.find("p.json"), std::string::npos) << e;
  EXPECT_NE(e.find("merge"), std::string::npos) << e;
}

TEST(ReportData, LongContextRowsAreReadAndRendered) {
  const Profile profile = tiny_profile();
  Plan plan = tiny_plan(profile);
  EXPECT_TRUE(report::build_report_data({profile, "profile.json"}, {plan, "plan.json"}, {})
                  .long_context.empty());
  nlohmann::json lc = {{"baseline", "KV8"},
                       {"rows",
                        {{{"ctx", 256},
                          {"chunks", 32},
                          {"scored", 4064},
                          {"plan_mean_kl", 0.04},
                          {"baseline_mean_kl", 0.05}},
                         {{"ctx", 2048},
                          {"chunks", 4},
                          {"scored", 4092},
                          {"plan_mean_kl", 0.03},
                          {"baseline_mean_kl", 0.06}}}}};
  nlohmann::json with_rows = plan_to_json(plan);
  with_rows["quality"]["long_context"] = lc;
  plan = plan_from_json(with_rows, "plan.json");
  const ReportData d =
      report::build_report_data({profile, "profile.json"}, {plan, "plan.json"}, {});
  ASSERT_EQ(d.long_context.size(), 2u);
  EXPECT_EQ(d.long_context_baseline, "KV8");
  EXPECT_EQ(d.long_context[1].ctx, 2048);
  EXPECT_EQ(d.long_context[1].scored, 4092);
  EXPECT_DOUBLE_EQ(d.long_context[1].baseline_mean_kl, 0.06);
  for (const std::string& page : {report::markdown_report(d), report::html_report(d)}) {
    EXPECT_NE(page.find("the plan against KV8"), std::string::npos);
    EXPECT_NE(page.find("2,048"), std::string::npos);
    EXPECT_NE(page.find("0.500"), std::string::npos) << "0.03 / 0.06";
  }
  nlohmann::json mistyped = plan_to_json(plan);
  mistyped["quality"]["long_context"]["rows"][0]["plan_mean_kl"] = "small";
  EXPECT_NE(plan_error(mistyped).find("quality.long_context.rows[0].plan_mean_kl"),
            std::string::npos);
}

// The allocation headroom is a fact of the validation section when the plan records it.
TEST(ReportData, HeadroomIsShownWhenThePlanRecordsIt) {
  const Profile profile = tiny_profile();
  Plan plan = tiny_plan(profile);
  for (const std::string& page : {report::markdown_report(report::build_report_data(
                                      {profile, "profile.json"}, {plan, "plan.json"}, {})),
                                  report::html_report(report::build_report_data(
                                      {profile, "profile.json"}, {plan, "plan.json"}, {}))}) {
    EXPECT_EQ(page.find("headroom"), std::string::npos);
  }
  plan.results.quality.headroom = AllocationHeadroom{0.0014, "KV8", 0.002, 0.7};
  const ReportData d =
      report::build_report_data({profile, "profile.json"}, {plan, "plan.json"}, {});
  for (const std::string& page : {report::markdown_report(d), report::html_report(d)}) {
    EXPECT_NE(page.find("headroom (additive surrogate)"), std::string::npos);
    EXPECT_NE(page.find("0.001400 / 0.002000 (KV8) = 0.700"), std::string::npos) << page;
  }
}

TEST(ReportData, RefusesMistypedRecordedFieldsNamingThem) {
  const Profile profile = tiny_profile();
  Plan plan = tiny_plan(profile);
  nlohmann::json j = plan_to_json(plan);
  j["pareto_front"][0]["predicted_error"] = "low";
  EXPECT_NE(plan_error(j).find("pareto_front[0].predicted_error"), std::string::npos);
  j = plan_to_json(plan);
  j["provenance"]["surrogate_weights"] = {1.0};
  EXPECT_NE(plan_error(j).find("provenance.surrogate_weights': 1 weights, expected one per layer"),
            std::string::npos);
  j = plan_to_json(plan);
  j["provenance"]["groups"] = {{{"layers", {0}}, {"side", "both"}}};
  EXPECT_NE(plan_error(j).find("provenance.groups[0].side"), std::string::npos) << plan_error(j);
  EXPECT_NE(plan_error(j).find("expected \"keys\" or \"values\""), std::string::npos);
  j = plan_to_json(plan);
  j["baselines"][1]["kl_difference"] = {{"low", 0.1}};
  EXPECT_NE(plan_error(j).find("baselines[1].kl_difference.plan_minus_baseline"),
            std::string::npos);
  plan.results.baselines[0].mean_kl.reset();
  EXPECT_NE(error_of(profile, plan).find("baselines[0].mean_kl' is missing"), std::string::npos);
  plan = tiny_plan(profile);
  report::MemoryOptions m;
  m.weights_bytes = m.gpu_memory_bytes;
  EXPECT_NE(error_of(profile, plan, m).find("--weights-bytes"), std::string::npos);
}

// Groups of one side (ik_llama.cpp's first/last-N, keys and values apart) keep their side.
TEST(ReportData, SearchGroupsOfOneSideReadBack) {
  Plan plan = tiny_plan(tiny_profile());
  plan.results.provenance.groups = {{{0}, "keys"}, {{0}, "values"}};
  const nlohmann::json j = plan_to_json(plan);
  EXPECT_EQ(j["provenance"]["groups"][1]["side"], "values");
  const Plan back = plan_from_json(j, "q.json");
  ASSERT_EQ(back.results.provenance.groups.size(), 2u);
  EXPECT_EQ(back.results.provenance.groups[0].side, "keys");
  EXPECT_EQ(back.results.provenance.groups[1].layers, std::vector<int>{0});
  plan.results.provenance.groups = {{{0}, ""}};
  EXPECT_FALSE(plan_to_json(plan)["provenance"]["groups"][0].contains("side"));
}

TEST(ReportData, WarnsWhenThePlanWasSearchedOnAnotherProfile) {
  const Profile profile = tiny_profile();
  Plan plan = tiny_plan(profile);
  plan.results.provenance.profile->hash = "0000000000000000";
  const ReportData d = report::build_report_data({profile, "p.json"}, {plan, "q.json"}, {});
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_NE(d.warnings[0].find("0000000000000000"), std::string::npos);
}

}  // namespace
}  // namespace kvplan::test
