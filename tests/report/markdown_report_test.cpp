#include "report/markdown_report.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "report/report_fixtures.h"

namespace kvplan::test {
namespace {

TEST(MarkdownReport, TablesForEverySectionAndTheChoiceInBold) {
  const std::string md = report::markdown_report(tiny_report());
  EXPECT_EQ(md.rfind("# kvplan report: tiny <model> & co\n", 0), 0u);
  for (const char* heading :
       {"## The plan, per layer", "## Per-layer sensitivity",
        "## Pareto front and uniform baselines", "## Memory", "## Validation", "## Provenance"}) {
    EXPECT_NE(md.find(heading), std::string::npos) << heading;
  }
  // Layer 1 chose KV4, whose dKL is 0.4: bold in the dKL table.
  EXPECT_NE(md.find("| 1 | 2.00e-04 | 0.00500 | **0.400** |"), std::string::npos) << md;
  EXPECT_NE(md.find("| **plan** | 6.000 | 112 | 2.29x |"), std::string::npos) << md;
  EXPECT_EQ(md.find("<svg"), std::string::npos);
  EXPECT_EQ(md, report::markdown_report(tiny_report()));
}

// report --engine-plans: a row per engine's plan, from its provenance and quality; a plan of
// another model or one never measured is refused naming the file.
TEST(MarkdownReport, PlansPerServingEngineTable) {
  const Profile profile = tiny_profile();
  report::ReportData d = tiny_report();
  EXPECT_EQ(report::markdown_report(d).find("## Plans per serving engine"), std::string::npos);
  Plan vllm = tiny_plan(profile);
  vllm.layers = {{0, 0, KvPair::parse("bf16/bf16")}, {1, 1, KvPair::parse("fp8_e4m3/fp8_e4m3")}};
  vllm.results.provenance.engine = "vllm";
  vllm.results.provenance.engine_structure = "one quantized dtype, fp8_e4m3";
  vllm.results.quality.mean_kl = 0.0123;
  vllm.results.quality.best_uniform = BestUniform{"KV4", 0.3, {-0.2877, -0.3, -0.27, ""}, 0.041};
  const Plan plan = tiny_plan(profile);
  d.engine_plans.push_back(report::engine_plan_row({plan, "plan-kvplan.json"}, plan));
  d.engine_plans.push_back(report::engine_plan_row({vllm, "plan-vllm.json"}, plan));
  const std::string md = report::markdown_report(d);
  EXPECT_NE(md.find("## Plans per serving engine"), std::string::npos);
  EXPECT_NE(md.find("| kvplan | any pair on any layer | 112 | 0.05000 | 90.00 % | - | - |"),
            std::string::npos)
      << md;
  EXPECT_NE(
      md.find("| vllm | one quantized dtype, fp8_e4m3 | 192 | 0.01230 | 90.00 % | KV4 (0.3000) "
              "| -0.2877 [-0.3000, -0.2700] |"),
      std::string::npos)
      << md;
  Plan other = vllm;
  other.model.fingerprint = "elsewhere";
  EXPECT_THROW((void)report::engine_plan_row({other, "other.json"}, plan), Error);
  Plan unmeasured = vllm;
  unmeasured.results.quality.mean_kl.reset();
  EXPECT_THROW((void)report::engine_plan_row({unmeasured, "u.json"}, plan), Error);
  Plan elsewhere = vllm;  // searched at another budget
  elsewhere.results.provenance.budget_value = 4000;
  EXPECT_THROW((void)report::engine_plan_row({elsewhere, "b.json"}, plan), Error);
}

}  // namespace
}  // namespace kvplan::test
