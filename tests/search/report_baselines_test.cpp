// The uniform pairs the report text measures: the best predicted, each family pairing's best,
// those near the budget among the top predicted, the engines' defaults and the validated ones,
// each with its reasons, never a pair outside the budget.
#include "search/report_baselines.h"

#include <gtest/gtest.h>

namespace kvplan::search {
namespace {

UniformConfig uniform(const char* pair, double bytes, double predicted) {
  return {KvPair::parse(pair), bytes, 0, predicted, {}};
}

std::vector<std::string> reasons_of(const std::map<KvPair, std::vector<std::string>>& why,
                                    const char* pair) {
  const auto it = why.find(KvPair::parse(pair));
  return it == why.end() ? std::vector<std::string>{} : it->second;
}

TEST(ReportBaselines, CoverTheStrongPairsWhateverTheSurrogatePredicts) {
  // By predicted error, as uniform_configs orders them. Budget 1000 bytes.
  const std::vector<UniformConfig> uniforms = {
      uniform("q8_0/q8_0", 1200, 0.001),          // best predicted, over the budget
      uniform("q8_0/q4_0", 990, 0.002),           // top, ggml/ggml, near the budget
      uniform("q5_0/q4_0", 900, 0.003),           // top (second)
      uniform("q4_0/q4_0", 800, 0.004),           // ggml/ggml again: not its pairing's best
      uniform("int8/int4", 985, 0.005),           // int/int's best, near the budget
      uniform("tq_mse4/tq_int4", 700, 0.006),     // turboquant/turboquant's best, a default
      uniform("tq_mse3/tq_int3", 600, 0.007),     // turboquant again, a default
      uniform("int4/int4", 650, 0.008),           // int/int again: nothing
      uniform("fp8_e4m3/q4_0", 880, 0.009),       // fp8/ggml's best
      uniform("int2/int2", 400, 0.010),           // int/int again, validated on selection
      uniform("fp8_e4m3/fp8_e4m3", 1100, 0.011),  // a default, over the budget: never
  };
  Budget budget;
  budget.limit = 1000;
  ReportBaselineOptions options;
  options.top = 2;
  options.near_budget_top = 5;
  options.near_budget_fraction = 0.03;
  options.references = {"tq_mse3/tq_int3", "tq_mse4/tq_int4", "fp8_e4m3/fp8_e4m3"};
  const auto why =
      report_baseline_reasons(uniforms, [](const UniformConfig& u) { return u.bytes_per_token; },
                              budget, options, {KvPair::parse("int2/int2")});

  EXPECT_TRUE(reasons_of(why, "q8_0/q8_0").empty());
  EXPECT_TRUE(reasons_of(why, "fp8_e4m3/fp8_e4m3").empty());
  EXPECT_EQ(reasons_of(why, "q8_0/q4_0"),
            (std::vector<std::string>{"top 2 predicted", "best of ggml/ggml",
                                      "within 3 % of the budget"}));
  EXPECT_EQ(reasons_of(why, "q5_0/q4_0"), (std::vector<std::string>{"top 2 predicted"}));
  EXPECT_TRUE(reasons_of(why, "q4_0/q4_0").empty());
  EXPECT_EQ(reasons_of(why, "int8/int4"),
            (std::vector<std::string>{"best of int/int", "within 3 % of the budget"}));
  EXPECT_EQ(
      reasons_of(why, "tq_mse4/tq_int4"),
      (std::vector<std::string>{"best of turboquant/turboquant", "engine or KVTuner default"}));
  EXPECT_EQ(reasons_of(why, "tq_mse3/tq_int3"),
            (std::vector<std::string>{"engine or KVTuner default"}));
  EXPECT_TRUE(reasons_of(why, "int4/int4").empty());
  EXPECT_EQ(reasons_of(why, "fp8_e4m3/q4_0"), (std::vector<std::string>{"best of fp8/ggml"}));
  EXPECT_EQ(reasons_of(why, "int2/int2"), (std::vector<std::string>{"validated on selection"}));
  EXPECT_EQ(why.size(), 7u);
}

TEST(ReportBaselines, TopZeroMeasuresEveryPairWithinTheBudget) {
  const std::vector<UniformConfig> uniforms = {uniform("q8_0/q8_0", 1200, 0.001),
                                               uniform("q4_0/q4_0", 800, 0.004),
                                               uniform("int4/int4", 650, 0.008)};
  Budget budget;
  budget.limit = 1000;
  ReportBaselineOptions options;
  options.top = 0;
  options.best_of_each_family_pairing = false;
  const auto why = report_baseline_reasons(
      uniforms, [](const UniformConfig& u) { return u.bytes_per_token; }, budget, options, {});
  EXPECT_EQ(why.size(), 2u);
  EXPECT_EQ(reasons_of(why, "int4/int4"),
            (std::vector<std::string>{"every pair within the budget"}));
}

}  // namespace
}  // namespace kvplan::search
