// `kvplan bench kv` and `kvplan bench serve` end to end on stories260K: every configuration on the
// same inputs, JSON and HTML out, bad input refused with exit code 2.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"
#include "test_paths.h"

namespace kvplan::test {
namespace {

namespace fs = std::filesystem;

class BenchServe : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = (models_dir() / "stories260K.gguf").string();
    KVPLAN_NEED_FILE(model_, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  }
  std::string serve(const std::string& extra) const {
    return "-q bench serve --model " + model_ +
           " --users 2 --rounds 2 --system-tokens 32 --document-tokens 64 --question-tokens 8"
           " --answer-tokens 4 --chunk-tokens 32 --user-interval 0 --think-time 0.01 " +
           extra;
  }
  std::string model_;
};

TEST_F(BenchServe, EveryConfigurationServesTheSameRequests) {
  const fs::path html =
      fs::temp_directory_path() / ("kvplan_serve_" + std::to_string(::getpid()) + ".html");
  const RunResult r = run_kvplan(
      serve("--kv int8/int8,int4/int2 --kv-memory 64KiB,1MiB --host-memory 2MiB,4MiB --json "
            "--html " +
            html.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 4u);
  EXPECT_EQ(j["workload"]["users"], 2);
  for (const auto& run : j["runs"]) {
    EXPECT_EQ(run["requests"].get<int>() >= 2, true);
    // A TTFT for every request issued and not refused.
    EXPECT_EQ(run["ttft_s"].size(), run["requests"].get<size_t>() - run["rejected"].get<size_t>())
        << run["kv"];
    // Host tiers paired with KV memories in order.
    EXPECT_EQ(run["host_memory_bytes"], run["kv_memory_bytes"] == 1 << 20 ? 4 << 20 : 2 << 20);
    if (run["kv_memory_bytes"] == 1 << 20) {
      EXPECT_EQ(run["completed"], 4) << run["kv"];
      EXPECT_GT(run["restored_tokens"].get<int>(), 0) << run["kv"];
    }
  }
  // The same workload: the larger memory serves every configuration's requests completely.
  EXPECT_EQ(j["runs"][2]["computed_tokens"], j["runs"][3]["computed_tokens"]);
  EXPECT_TRUE(fs::exists(html));
  EXPECT_NE(slurp(html).find("<svg"), std::string::npos);
  fs::remove(html);
}

TEST_F(BenchServe, BenchKvPrintsMemoryAndSpeedPerConfiguration) {
  const RunResult r = run_kvplan("-q bench kv --model " + model_ +
                                 " --kv int8/int8,int4/int2 --memory-tokens 1K --prompt-tokens "
                                 "64 --decode-tokens 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["configs"].size(), 2u);
  for (const auto& c : j["configs"]) {
    // The cache holds what the estimate says (pages rounded the same way).
    EXPECT_EQ(c["memory"][0]["held_bytes"], c["memory"][0]["estimate_bytes"]) << c["kv"];
    EXPECT_GT(c["prefill_tokens_per_s"].get<double>(), 0);
  }
  EXPECT_EQ(j["configs"][0]["prefill_vs_first"], 1.0);
}

TEST_F(BenchServe, BadInputExitsTwo) {
  EXPECT_EQ(run_kvplan(serve("--kv bogus")).exit_code, 2);
  EXPECT_EQ(run_kvplan(serve("--kv-memory lots")).exit_code, 2);
  EXPECT_EQ(run_kvplan(serve("--users 0")).exit_code, 2);
  EXPECT_EQ(run_kvplan(serve("--kv /nonexistent.json")).exit_code, 2);
  EXPECT_EQ(run_kvplan(serve("--document-reuse 2")).exit_code, 2);
  // Host tiers: one size, or one per KV memory.
  EXPECT_EQ(run_kvplan(serve("--kv-memory 64KiB,1MiB --host-memory 1MiB,2MiB,3MiB")).exit_code, 2);
  EXPECT_EQ(run_kvplan(serve("--host-memory plenty")).exit_code, 2);
  EXPECT_EQ(run_kvplan("-q bench kv --model " + model_ + " --kv q4_0/q4_0").exit_code, 2);
  EXPECT_EQ(
      run_kvplan("-q bench kv --model " + model_ + " --kv int4/int4 --prompt-tokens 0").exit_code,
      2);
}

}  // namespace
}  // namespace kvplan::test
