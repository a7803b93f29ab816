#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"
#include "test_paths.h"

namespace kvplan::test {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  return nlohmann::json::parse(slurp(p));
}

class TuneCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = models_dir() / "stories260K.gguf";
    if (!fs::exists(model_)) GTEST_SKIP() << model_ << " absent";
    dir_ = fs::temp_directory_path() / ("kvplan_tune_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string tune(const std::string& out, const std::string& extra = "") {
    return "-q tune --model " + model_.string() + " --num-prompts 8 --max-tokens 64 " +
           "--population 16 --generations 40 --max-bits 4 -o " + (dir_ / out).string() + " " +
           extra;
  }
  fs::path model_, dir_;
};

TEST_F(TuneCommand, PlanBeatsUniformWithinBudgetAndIsReproducible) {
  const RunResult r =
      run_kvplan(tune("a.json", "--profile-out " + (dir_ / "profile.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = read_json(dir_ / "a.json");
  EXPECT_EQ(plan["schema"], "kvplan.plan/v1");
  EXPECT_LE(plan["summary"]["equivalent_bits"].get<double>(), 4.0 + 1e-9);
  EXPECT_TRUE(plan["quality"]["validated"].get<bool>());
  const double kl = plan["quality"]["mean_kl"].get<double>();
  double best_uniform = 1e300;
  for (const auto& b : plan["baselines"]) {
    if (b["within_budget"].get<bool>())
      best_uniform = std::min(best_uniform, b["mean_kl"].get<double>());
  }
  EXPECT_LE(kl, best_uniform) << "the plan must not lose to a uniform pair of the same budget";
  // Every uniform point within budget is matched or beaten by the Pareto front.
  for (const auto& b : plan["baselines"]) {
    if (!b["within_budget"].get<bool>()) continue;
    bool covered = false;
    for (const auto& p : plan["pareto_front"]) {
      covered = covered ||
                p["equivalent_bits"].get<double>() <= b["equivalent_bits"].get<double>() + 1e-9;
    }
    EXPECT_TRUE(covered) << b["kv"];
  }
  // Same inputs and seed: the same plan apart from `created`.
  const RunResult again = run_kvplan(tune("b.json"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto a = plan, b = read_json(dir_ / "b.json");
  a.erase("created");
  b.erase("created");
  EXPECT_EQ(a, b);
  // search on the saved profile gives the same plan too.
  const RunResult s = run_kvplan(
      "-q search --profile " + (dir_ / "profile.json").string() + " --model " + model_.string() +
      " --population 16 --generations 40 --max-bits 4 -o " + (dir_ / "c.json").string());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  auto c = read_json(dir_ / "c.json");
  c.erase("created");
  EXPECT_EQ(a, c);
  // Exports.
  const RunResult yaml =
      run_kvplan("export --plan " + (dir_ / "a.json").string() + " --to kvtuner-yaml");
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_NE(yaml.out.find("nbits_key"), std::string::npos);
  const RunResult vllm = run_kvplan("export --plan " + (dir_ / "a.json").string() + " --to vllm");
  EXPECT_EQ(vllm.exit_code, 0);
  EXPECT_NE(vllm.err.find("cannot be expressed"), std::string::npos);
  // head_dim 8: llama.cpp's block types cannot hold the rows, said in one line.
  const RunResult llama =
      run_kvplan("export --plan " + (dir_ / "a.json").string() + " --to llamacpp");
  EXPECT_EQ(llama.exit_code, 2);
  EXPECT_EQ(count_lines(llama.err), 1);
}

TEST_F(TuneCommand, BadBudgetsAndMismatchedProfilesAreRefused) {
  RunResult r = run_kvplan(tune("x.json", "--gpu-memory 8GiB"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_kvplan("-q tune --model " + model_.string() + " --max-bits 4 --population 30 -o " +
                 (dir_ / "y.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("population"), std::string::npos) << r.err;
  // --device is checked before the model is profiled.
  r = run_kvplan(tune("d.json", "--device gpu:x"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "d.json"));
  const fs::path smol = smollm2_path();
  ASSERT_EQ(run_kvplan(tune("z.json", "--profile-out " + (dir_ / "p.json").string())).exit_code, 0);
  if (!fs::exists(smol)) GTEST_SKIP() << smol << " absent: the cross-model check needs SmolLM2";
  r = run_kvplan("-q search --profile " + (dir_ / "p.json").string() + " --model " + smol.string() +
                 " --max-bits 4 -o " + (dir_ / "w.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "w.json"));
}

}  // namespace
}  // namespace kvplan::test
