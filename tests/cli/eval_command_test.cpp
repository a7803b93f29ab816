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

}  // namespace
}  // namespace kvplan::test
