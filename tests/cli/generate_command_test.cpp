// `kvplan generate --trace-out`: each step's most likely tokens, what
// scripts/compare/greedy-vs-llamacpp.py reads to place a divergence from llama.cpp at a near-tie or
// not.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"
#include "test_paths.h"

namespace kvplan::test {
namespace {

namespace fs = std::filesystem;

TEST(GenerateCommand, TraceListsEachStepsTopTokensBestFirst) {
  const fs::path model = models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const fs::path trace =
      fs::temp_directory_path() / ("kvplan_generate_trace_" + std::to_string(::getpid()) + ".json");
  const RunResult r = run_kvplan("-q generate --model " + model.string() +
                                 " --prompt 'Once upon a time' --max-tokens 12 --threads 1 "
                                 "--trace-out " +
                                 trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(trace));
  fs::remove(trace);
  ASSERT_TRUE(j["prompt_ids"].is_array());
  EXPECT_EQ(j["prompt_ids"][0], 1) << "BOS first";
  const auto& steps = j["steps"];
  ASSERT_GE(steps.size(), 1u);
  ASSERT_LE(steps.size(), 12u);
  std::string generated;
  for (const auto& step : steps) {
    const auto& top = step["top"];
    ASSERT_EQ(top.size(), 5u);
    for (size_t i = 1; i < top.size(); ++i) {
      EXPECT_GE(top[i - 1]["logit"].get<double>(), top[i]["logit"].get<double>());
    }
    if (!step["stop"].get<bool>()) generated += top[0]["text"].get<std::string>();
  }
  // The printed text is the prompt followed by each step's best token.
  EXPECT_EQ(r.out, "Once upon a time" + generated + "\n");
}

}  // namespace
}  // namespace kvplan::test
