// kvplan verify end to end through the built binary.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"
#include "runtime_test_util.h"

namespace kvplan {
namespace {

namespace fs = std::filesystem;

TEST(VerifyCommand, MixedPlanIsExactThroughEveryTier) {
  const fs::path plan =
      fs::temp_directory_path() / ("kvplan_verify_" + std::to_string(::getpid()) + ".json");
  write_plan(plan, test::mixed_plan());
  const test::RunResult r = test::run_kvplan("verify --json --plan " + plan.string());
  fs::remove(plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["guard_violations"], 0);
  ASSERT_EQ(j["layers"].size(), 5u);
  for (const auto& l : j["layers"]) {
    EXPECT_EQ(l["host_mismatches"], 0);
    EXPECT_EQ(l["disk_mismatches"], 0);
    EXPECT_EQ(l["attention_device_vs_host_max_abs_diff"], 0.0);
    EXPECT_GT(l["quality"]["attention_rel_error"].get<double>(), 0.0);  // quantization is lossy
  }
  EXPECT_LT(j["layers"][0]["quality"]["key_rel_error"].get<double>(), 0.01);  // bf16
}

TEST(VerifyCommand, SlotPlanHumanOutput) {
  const test::RunResult r = test::run_kvplan(std::string("verify --plan ") + KVPLAN_SOURCE_DIR +
                                             "/configs/plans/minimax-m2.5-slot134.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("OK: every byte came back"), std::string::npos);
  EXPECT_NE(r.out.find("opaque slot"), std::string::npos);
}

TEST(VerifyCommand, BadInputExitsTwo) {
  EXPECT_EQ(test::run_kvplan("verify --plan /nonexistent.json").exit_code, 2);
  const fs::path plan =
      fs::temp_directory_path() / ("kvplan_verify_b_" + std::to_string(::getpid()) + ".json");
  write_plan(plan, test::mixed_plan());
  EXPECT_EQ(test::run_kvplan("verify --plan " + plan.string() + " --model llama-3.1-8b").exit_code,
            2);
  EXPECT_EQ(test::run_kvplan("verify --plan " + plan.string() + " --chunk-tokens 24").exit_code, 2);
  fs::remove(plan);
}

}  // namespace
}  // namespace kvplan
