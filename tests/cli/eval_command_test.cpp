// `kvplan eval --json` says where each part of the evaluation ran: the forward pass and the KV
// quantization are CPU code whatever --device selected.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"
#include "test_paths.h"

namespace kvplan::test {
namespace {

namespace fs = std::filesystem;

TEST(EvalCommand, JsonReportsWhereTheForwardAndKvQuantizationRan) {
  const fs::path model = models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const fs::path prompts =
      fs::temp_directory_path() / ("kvplan_eval_device_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(prompts) << "Once upon a time there was a little cat.\n";
  for (const char* device : {"cpu", "auto"}) {
    const RunResult r = run_kvplan("-q eval --model " + model.string() + " --prompts " +
                                   prompts.string() + " --kv K4V2 --device " + device + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j["device"].is_object()) << r.out;
    EXPECT_EQ(j["device"]["forward"], "cpu");
    EXPECT_EQ(j["device"]["kv_quantization"], "cpu");
    EXPECT_EQ(j["device"]["gpu_used"], false);
    EXPECT_FALSE(j["device"]["selected"].get<std::string>().empty());
  }
  fs::remove(prompts);
}

TEST(EvalCommand, SeveralContextLengthsGiveOneResultEach) {
  const fs::path model = models_dir() / "stories260K.gguf";
  const fs::path text = data_dir() / "tinystories-valid-sample.txt";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  KVPLAN_NEED_FILE(text, "TinyStories sample: ../shared/data");
  const std::string base = "-q eval --model " + model.string() + " --text " + text.string() +
                           " --kv K4V2 --chunks 2 --json --ctx ";
  // 10^6 tokens exceeds both the model's context and the text: left out, not an error.
  const RunResult r = run_kvplan(base + "64,128,1000000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 2u) << r.out;
  EXPECT_FALSE(j.contains("result"));
  for (size_t i = 0; i < 2; ++i) {
    const auto& one = j["results"][i];
    EXPECT_EQ(one["ctx"], i == 0 ? 64 : 128);
    EXPECT_EQ(one["chunks"], 2);
    // llama-perplexity scores rows [ctx/2, ctx-1) of each chunk.
    EXPECT_EQ(one["scored_tokens"], 2 * (one["ctx"].get<int>() / 2 - 1));
    EXPECT_GT(one["mean_kl"].get<double>(), 0.0);
  }
  // A single length keeps the one-result shape.
  const RunResult single = run_kvplan(base + "64");
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const auto s = nlohmann::json::parse(single.out);
  EXPECT_EQ(s["result"]["mean_kl"], j["results"][0]["mean_kl"]);

  const RunResult none = run_kvplan(base + "1000000");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no length fits"), std::string::npos) << none.err;
}

TEST(EvalCommand, SeveralContextLengthsNeedText) {
  const fs::path model = models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const fs::path prompts =
      fs::temp_directory_path() / ("kvplan_eval_ctx_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(prompts) << "Once upon a time there was a little cat.\n";
  const RunResult r = run_kvplan("-q eval --model " + model.string() + " --prompts " +
                                 prompts.string() + " --kv K4V2 --ctx 64,128");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--ctx with several lengths needs --text"), std::string::npos) << r.err;
  fs::remove(prompts);
}

}  // namespace
}  // namespace kvplan::test
