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

// --kv takes a plan.json as --plan does (kvplan serve --kv plan.json, bench serve's spelling); two
// plans are refused.
TEST(EvalCommand, KvTakesAPlanFileAsPlanDoes) {
  const fs::path model = models_dir() / "stories260K.gguf";
  const fs::path text = data_dir() / "tinystories-valid-sample.txt";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  KVPLAN_NEED_FILE(text, "TinyStories sample: ../shared/data");
  const fs::path plan =
      fs::path(KVPLAN_SOURCE_DIR) / "data" / "reference" / "stories260k" / "plan-320.json";
  const std::string base = "-q eval --model " + model.string() + " --text " + text.string() +
                           " --ctx 64 --chunks 2 --json ";
  const RunResult as_plan = run_kvplan(base + "--plan " + plan.string());
  const RunResult as_kv = run_kvplan(base + "--kv " + plan.string());
  ASSERT_EQ(as_plan.exit_code, 0) << as_plan.err;
  ASSERT_EQ(as_kv.exit_code, 0) << as_kv.err;
  const auto a = nlohmann::json::parse(as_plan.out), b = nlohmann::json::parse(as_kv.out);
  EXPECT_EQ(a["kv_cache"], b["kv_cache"]);
  EXPECT_EQ(a["result"]["mean_kl"], b["result"]["mean_kl"]);

  const RunResult two = run_kvplan(base + "--plan " + plan.string() + " --kv " + plan.string());
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("one plan at most"), std::string::npos) << two.err;
}

// A per-KV-head plan (v3) runs in eval on the harness's per-head cache and in estimate; what holds
// one pair per layer (bench serve, the runtime's pages) refuses it in one line, exit 2.
TEST(EvalCommand, PerKvHeadPlansRunInEvalEstimateServeAndVerify) {
  const fs::path model = models_dir() / "stories260K.gguf";
  const fs::path text = data_dir() / "tinystories-valid-sample.txt";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  KVPLAN_NEED_FILE(text, "TinyStories sample: ../shared/data");
  const fs::path dir = fs::path(KVPLAN_SOURCE_DIR) / "data" / "reference" / "stories260k";
  const fs::path per_head = dir / "per-head" / "plan-320.json";
  const std::string base = "-q eval --model " + model.string() + " --text " + text.string() +
                           " --ctx 64 --chunks 2 --json --plan ";
  const RunResult heads = run_kvplan(base + per_head.string());
  const RunResult layers = run_kvplan(base + (dir / "plan-320.json").string());
  ASSERT_EQ(heads.exit_code, 0) << heads.err;
  ASSERT_EQ(layers.exit_code, 0) << layers.err;
  const auto h = nlohmann::json::parse(heads.out), l = nlohmann::json::parse(layers.out);
  EXPECT_NE(h["kv_cache"].dump().find("per KV head"), std::string::npos) << h["kv_cache"];
  EXPECT_GT(h["result"]["mean_kl"].get<double>(), 0.0);
  EXPECT_NE(h["result"]["mean_kl"], l["result"]["mean_kl"]);

  const RunResult estimate = run_kvplan("-q estimate --model " + model.string() + " --plan " +
                                        per_head.string() + " --context 4096 --json");
  ASSERT_EQ(estimate.exit_code, 0) << estimate.err;
  EXPECT_NE(estimate.out.find("320"), std::string::npos) << estimate.out;

  // Serving pages each layer's head runs: the plan's bytes per token, its quality.
  const RunResult serve = run_kvplan("-q bench serve --model " + model.string() + " --kv " +
                                     per_head.string() + " --users 1 --rounds 1");
  ASSERT_EQ(serve.exit_code, 0) << serve.err;
  EXPECT_NE(serve.out.find("plan:plan-320.json"), std::string::npos) << serve.out;
  EXPECT_NE(serve.out.find("  320 "), std::string::npos) << serve.out;
  const RunResult verify = run_kvplan("-q verify --json --plan " + per_head.string());
  ASSERT_EQ(verify.exit_code, 0) << verify.err;
  const auto v = nlohmann::json::parse(verify.out);
  EXPECT_TRUE(v["ok"].get<bool>());
  EXPECT_NE(v["layers"][2]["pair"].get<std::string>().find(", "), std::string::npos);
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

// Pass-key retrieval: exact KV answers every case first; a configuration is asked only what exact
// KV retrieved; the same flags give the same report.
TEST(EvalCommand, PasskeyAsksConfigurationsOnlyWhatExactKvRetrieves) {
  const fs::path model = models_dir() / "stories260K.gguf";
  const fs::path text = data_dir() / "tinystories-valid-sample.txt";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  KVPLAN_NEED_FILE(text, "TinyStories sample: ../shared/data");
  const std::string args = "-q eval --task passkey --model " + model.string() + " --text " +
                           text.string() +
                           " --kv K4V2 --ctx 300,400 --depths 0,1 --haystacks 2 --keys 2 --json";
  const RunResult r = run_kvplan(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["task"], "passkey");
  EXPECT_EQ(j["configs"], nlohmann::json::array({"exact", "K4V2"}));
  ASSERT_EQ(j["cases"].size(), 2u * 2u * 2u);
  for (const auto& c : j["cases"]) {
    EXPECT_LE(c["prompt_tokens"].get<int>(), c["context"].get<int>());
    EXPECT_EQ(c["key"].get<std::string>().size(), 5u);
    EXPECT_FALSE(c["label"].get<std::string>().empty());
    ASSERT_TRUE(c["answers"].contains("exact")) << c;
    const bool exact_retrieved = c["answers"]["exact"]["correct"].get<bool>();
    EXPECT_EQ(c["answers"].contains("K4V2"), exact_retrieved) << c;
  }
  const RunResult again = run_kvplan(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, r.out);

  const RunResult text_out =
      run_kvplan("-q eval --task passkey --model " + model.string() + " --text " + text.string() +
                 " --ctx 256 --depths 0.5 " + "--haystacks 1");
  ASSERT_EQ(text_out.exit_code, 0) << text_out.err;
  EXPECT_NE(text_out.out.find("exact"), std::string::npos) << text_out.out;
  EXPECT_NE(text_out.out.find("/1"), std::string::npos) << text_out.out;
}

TEST(EvalCommand, PasskeyRefusesBadFlagsWithExitCode2) {
  const fs::path model = models_dir() / "stories260K.gguf";
  const fs::path text = data_dir() / "tinystories-valid-sample.txt";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  KVPLAN_NEED_FILE(text, "TinyStories sample: ../shared/data");
  const std::string base = "-q eval --model " + model.string();
  const std::string passkey = base + " --task passkey --text " + text.string() + " --ctx 256";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + " --task passkey --ctx 256", "--text FILE gives the filler"},
      {passkey + " --depths 0,1.5", "depth 1.5"},
      {passkey + " --keys 11", "11 keys"},
      {passkey + " --haystacks 0", "0 haystacks"},
      {passkey + " --ctx 64", "too short"},
      {passkey + " --ctx 100000", "context of"},
      {passkey + " --chunks 3", "--chunks is not used"},
      {base + " --text " + text.string() + " --keys 2", "need --task passkey"},
      {base + " --text " + text.string() + " --task retrieval", "--task"},
  };
  for (const auto& [args, message] : cases) {
    const RunResult r = run_kvplan(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
  }
}

// SmolLM2 retrieves a key at 512 tokens with exact KV (the table in README is measured the same
// way): the whole path from haystack to scored answer works, and the configuration is asked.
TEST(EvalCommand, PasskeySmolLM2RetrievesAndAsksThePlan) {
  const fs::path text = data_dir() / "tinystories-valid-sample.txt";
  const fs::path plan = fs::path(KVPLAN_SOURCE_DIR) / "data/reference/smollm2-135m/plan-6480.json";
  KVPLAN_NEED_FILE(smollm2_path(), "run scripts/models/fetch-smollm2.sh");
  KVPLAN_NEED_FILE(text, "TinyStories sample: ../shared/data");
  const RunResult r = run_kvplan("-q eval --task passkey --model " + smollm2_path().string() +
                                 " --text " + text.string() + " --plan " + plan.string() +
                                 " --ctx 512 --depths 0,1 --haystacks 1 --threads 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["cases"].size(), 2u);
  int retrieved = 0;
  for (const auto& c : j["cases"]) {
    const auto& exact = c["answers"]["exact"];
    EXPECT_EQ(exact["generated"].get<std::string>().find(c["key"].get<std::string>()) !=
                  std::string::npos,
              exact["correct"].get<bool>())
        << c;
    if (!exact["correct"].get<bool>()) continue;
    ++retrieved;
    EXPECT_TRUE(c["answers"].contains("plan:plan-6480.json")) << c;
  }
  EXPECT_GE(retrieved, 1) << r.out;
}

}  // namespace
}  // namespace kvplan::test
