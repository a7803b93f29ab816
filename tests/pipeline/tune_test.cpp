// The main job as a library call: pipeline::tune on stories260K, without the binary — every input
// checked before the profile, the profile handed out before the search, and the search half on
// the saved profile giving the same plan.
#include "pipeline/tune.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/kv_bytes.h"
#include "test_paths.h"

namespace kvplan::test {
namespace {

namespace fs = std::filesystem;

fs::path calibration_dir() {
  return fs::path(KVPLAN_SOURCE_DIR) / "configs" / "calibration";
}

class PipelineTune : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = models_dir() / "stories260K.gguf";
    KVPLAN_NEED_FILE(model_, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  }

  // A quick request: 8 short calibration prompts, a small NSGA-II, windows of 128 tokens.
  pipeline::TuneRequest request(double bytes_per_token) const {
    pipeline::TuneRequest r;
    r.model = model_;
    r.profile.calibration = {.file = calibration_dir() / "default.jsonl",
                             .options = {.max_tokens = 64, .num_prompts = 8}};
    r.search.budget = BudgetRequest::bytes_per_token(bytes_per_token);
    r.search.options.nsga2.population = 16;
    r.search.options.nsga2.generations = 40;
    r.search.texts = {.selection = calibration_dir() / "selection.jsonl",
                      .report = calibration_dir() / "report.jsonl",
                      .ctx = 128};
    r.search.long_context = {.contexts = {256}, .tokens_per_context = 512};
    r.search.stamp = {.tool_version = "test", .created = "2026-12-04T00:00:00Z"};
    return r;
  }

  fs::path model_;
};

TEST_F(PipelineTune, TunesWithinTheBudgetAndHandsTheProfileOutBeforeTheSearch) {
  pipeline::TuneRequest r = request(320);
  int profiles = 0;
  r.profile.on_profile = [&](const Profile& p) {
    ++profiles;
    EXPECT_TRUE(p.complete());
  };
  const pipeline::TunedPlan t = pipeline::tune(r);
  EXPECT_EQ(profiles, 1);
  EXPECT_EQ(t.budget.limit, 320);
  const PlanSummary s = summarize_plan(t.plan);
  EXPECT_LE(s.bytes_per_token, 320);
  EXPECT_EQ(t.plan.model.fingerprint, t.profile.model.fingerprint);
  EXPECT_EQ(t.plan.layers.size(), 5u);
  EXPECT_EQ(t.plan.created, "2026-12-04T00:00:00Z");
  ASSERT_TRUE(t.plan.results.quality.mean_kl.has_value());
  // Every measured baseline is no better than the chosen plan on the selection text it was
  // chosen on.
  ASSERT_FALSE(t.outcome.loop.measured.empty());
  for (const search::MeasuredPlan& m : t.outcome.loop.measured) {
    EXPECT_GE(m.measured, t.outcome.loop.chosen.measured);
  }
  EXPECT_EQ(t.selection_file, (calibration_dir() / "selection.jsonl").string());

  // The search half on the saved profile chooses the same plan.
  const pipeline::TunedPlan again = pipeline::search_profile(
      t.profile, model_, r.search, std::nullopt, calibration_dir() / "default.jsonl");
  ASSERT_EQ(again.plan.layers.size(), t.plan.layers.size());
  for (size_t l = 0; l < t.plan.layers.size(); ++l) {
    EXPECT_EQ(again.plan.layers[l].pair, t.plan.layers[l].pair) << "layer " << l;
  }
  EXPECT_EQ(again.plan.results.quality.mean_kl, t.plan.results.quality.mean_kl);
}

// Per KV head on the same profile and budget: a plan whose layers may give their heads different
// pairs, within the budget, measured against the per-layer plan on the report text (paired); its
// plan.json is v3 and reads back to the same configuration.
TEST_F(PipelineTune, SearchesPerKvHeadAndComparesWithThePerLayerPlan) {
  pipeline::TuneRequest r = request(360);
  r.profile.options.per_head_dkl = true;
  const pipeline::TunedPlan per_layer = pipeline::tune(r);
  const fs::path layer_plan = fs::temp_directory_path() / "kvplan_tune_test_per_layer.json";
  write_plan(layer_plan, per_layer.plan);

  pipeline::SearchRequest heads = r.search;
  heads.options.granularity = KvGranularity::kHead;
  heads.compare_plans = {layer_plan};
  const pipeline::TunedPlan t = pipeline::search_profile(
      per_layer.profile, model_, heads, std::nullopt, calibration_dir() / "default.jsonl");
  const int n_kv = t.plan.model.geometry.n_kv_heads_total();
  EXPECT_EQ(t.outcome.space.layers.size(), static_cast<size_t>(n_kv));
  EXPECT_EQ(t.outcome.loop.chosen.assignment.pairs.size(), static_cast<size_t>(n_kv));
  EXPECT_LE(summarize_plan(t.plan).bytes_per_token, 360);
  EXPECT_EQ(t.plan.kv_config(),
            t.plan.per_head() ? t.outcome.loop.chosen.assignment.pairs : t.plan.pairs());
  const PlanQuality& q = t.plan.results.quality;
  ASSERT_EQ(q.compared_plans.size(), 1u);
  EXPECT_EQ(q.compared_plans[0].source, layer_plan.filename().string());
  EXPECT_EQ(q.compared_plans[0].granularity, "per layer");
  // The per-layer plan measures on the report text as it did in its own search.
  EXPECT_EQ(q.compared_plans[0].mean_kl, per_layer.plan.results.quality.mean_kl.value());
  EXPECT_NEAR(q.compared_plans[0].difference.plan_minus_baseline,
              *q.mean_kl - q.compared_plans[0].mean_kl, 1e-12);
  EXPECT_EQ(t.plan.results.provenance.granularity, "per KV head");
  EXPECT_EQ(plan_to_json(t.plan)["schema"], kPlanSchemaV3);
  EXPECT_EQ(t.plan.results.provenance.surrogate_weights.size(), static_cast<size_t>(n_kv));
  const Plan back = plan_from_json(plan_to_json(t.plan), "plan.json");
  EXPECT_EQ(back.kv_config(), t.plan.kv_config());
  EXPECT_EQ(back.results.quality.compared_plans.size(), 1u);
  fs::remove(layer_plan);
}

TEST_F(PipelineTune, RefusesABudgetBelowTheSmallestPlanBeforeProfiling) {
  pipeline::TuneRequest r = request(10);
  bool profiled = false;
  r.profile.on_profile = [&](const Profile&) { profiled = true; };
  try {
    (void)pipeline::tune(r);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("the smallest possible plan takes"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(profiled);
}

TEST_F(PipelineTune, RefusesOverlappingTextsBeforeProfiling) {
  pipeline::TuneRequest r = request(320);
  r.search.texts.report = r.search.texts.selection;
  bool profiled = false;
  r.profile.on_profile = [&](const Profile&) { profiled = true; };
  try {
    (void)pipeline::tune(r);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(profiled);
}

}  // namespace
}  // namespace kvplan::test
