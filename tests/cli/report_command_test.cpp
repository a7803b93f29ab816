// `kvplan report` end to end on the committed references (data/reference/<model>/).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"

namespace kvplan::test {
namespace {

namespace fs = std::filesystem;

class ReportCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvplan_report_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string reference(const std::string& model, const std::string& file) {
    return (fs::path(KVPLAN_SOURCE_DIR) / "data" / "reference" / model / file).string();
  }
  std::string out(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// The reference budgets of scripts/ci/regenerate-references.sh, bytes per token, and the
// per-KV-head plans beside them (<model>/per-head/).
const std::vector<std::pair<std::string, std::string>> kReferences = {
    {"stories260k", "320"},
    {"stories260k", "360"},
    {"smollm2-135m", "6480"},
    {"smollm2-135m", "12240"},
    {"smollm2-135m", "5760"},
    {"gemma3-270m", "5184"},
    {"gemma3-270m", "9792"},
    {"stories260k/per-head", "320"},
    {"stories260k/per-head", "360"},
    {"smollm2-135m/per-head", "6480"},
    {"smollm2-135m/per-head", "5760"},
    {"smollm2-135m/per-head", "12240"}};

TEST_F(ReportCommand, CommittedReferenceReportsAreWhatTheCommandWritesToday) {
  for (const auto& [model, budget] : kReferences) {
    for (const std::string format : {"html", "md"}) {
      const std::string file = "report-" + budget + "." + format;
      const RunResult r = run_kvplan("-q report --profile " + reference(model, "profile.json") +
                                     " --plan " + reference(model, "plan-" + budget + ".json") +
                                     " --format " + format + " -o " + out(file));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      // Compared without printing: a report is hundreds of KB.
      EXPECT_TRUE(slurp(out(file)) == slurp(reference(model, file)))
          << "data/reference/" << model << "/" << file
          << " is stale: run scripts/ci/regenerate-references.sh --reports-only";
    }
  }
}

// The per-engine reference (scripts/compare/engine-table.sh): kvplan's plan on the all-formats
// profile with the table of the best plan each serving engine runs at the same budget.
TEST_F(ReportCommand, CommittedEngineTableIsWhatTheCommandWritesToday) {
  const std::string dir = "smollm2-135m";
  std::string plans;
  for (const char* engine :
       {"kvplan", "llamacpp", "ik-llamacpp", "vllm", "trtllm", "modelopt", "hf"}) {
    plans += (plans.empty() ? "" : ",") +
             reference(dir, std::string("engines/plan-") + engine + "-6480.json");
  }
  for (const std::string format : {"html", "md"}) {
    const std::string file = "report-engines-6480." + format;
    const RunResult r =
        run_kvplan("-q report --profile " + reference(dir, "engines/profile-all-formats.json") +
                   " --plan " + reference(dir, "engines/plan-kvplan-6480.json") +
                   " --engine-plans " + plans + " --format " + format + " -o " + out(file));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(slurp(out(file)) == slurp(reference(dir, "engines/" + file)))
        << "data/reference/" << dir << "/engines/" << file
        << " is stale: run scripts/compare/engine-table.sh";
  }
  // Every engine's plan keeps within the budget and runs on its engine as it is.
  const std::string md = slurp(reference(dir, "engines/report-engines-6480.md"));
  EXPECT_NE(md.find("## Plans per serving engine"), std::string::npos);
  for (const char* engine : {"llamacpp", "ik-llamacpp", "vllm", "trtllm", "modelopt", "hf"}) {
    const nlohmann::json plan = nlohmann::json::parse(
        slurp(reference(dir, std::string("engines/plan-") + engine + "-6480.json")));
    EXPECT_EQ(plan["provenance"]["engine"], engine);
    EXPECT_LE(plan["summary"]["bytes_per_token"].get<double>(), 6480.0);
  }
  // vLLM TurboQuant keeps layers 0, 1, 28, 29 at 16 bits: no plan within 6480 B/token, the reason
  // recorded, and its best plan at the least bytes it can take, on its boundary layers 16-bit.
  EXPECT_NE(slurp(reference(dir, "engines/refused-vllm-turboquant-6480.txt"))
                .find("the smallest possible plan takes"),
            std::string::npos);
  const nlohmann::json least =
      nlohmann::json::parse(slurp(reference(dir, "engines/plan-vllm-turboquant-least.json")));
  EXPECT_EQ(least["provenance"]["engine"], "vllm-turboquant");
  EXPECT_GT(least["summary"]["bytes_per_token"].get<double>(), 6480.0);
  for (const auto& l : least["layers"]) {
    const int index = l["index"].get<int>();
    if (index >= 2 && index < 28) continue;
    EXPECT_TRUE(l["key"] == "f16" || l["key"] == "bf16") << index;
    EXPECT_EQ(l["key"], l["value"]) << index;
  }
}

// The claim the reference plans stand for: on the report text, each plan's mean KL is at most the
// best uniform configuration's within its budget, and at most 0.9 x at two budgets or more.
TEST_F(ReportCommand, ReferencePlansBeatTheBestUniformConfigurationOnTheReportText) {
  for (const std::string model : {"stories260k", "smollm2-135m", "gemma3-270m"}) {
    int clear_wins = 0;
    for (const auto& [m, budget] : kReferences) {
      if (m != model) continue;
      const nlohmann::json plan =
          nlohmann::json::parse(slurp(reference(model, "plan-" + budget + ".json")));
      const double kl = plan["quality"]["mean_kl"].get<double>();
      double best = 1e300;
      for (const auto& b : plan["baselines"]) best = std::min(best, b["mean_kl"].get<double>());
      EXPECT_LE(kl, best) << model << " at " << budget << " B/token";
      EXPECT_EQ(plan["summary"]["bytes_per_token"].get<double>() <= std::stod(budget), true);
      clear_wins += kl <= 0.9 * best;
    }
    EXPECT_GE(clear_wins, 2) << model;
  }
}

TEST_F(ReportCommand, SameInputsSameBytes) {
  const std::string args = "-q report --profile " + reference("stories260k", "profile.json") +
                           " --plan " + reference("stories260k", "plan-320.json") +
                           " --gpu-memory 24GiB --weights-bytes 1GiB --context 8K,32K -o ";
  ASSERT_EQ(run_kvplan(args + out("a.html")).exit_code, 0);
  ASSERT_EQ(run_kvplan(args + out("b.html")).exit_code, 0);
  const std::string a = slurp(out("a.html"));
  EXPECT_GT(a.size(), 10000u);
  EXPECT_TRUE(a == slurp(out("b.html"))) << "two runs gave different bytes";
  EXPECT_NE(a.find("T=8,192"), std::string::npos);
  EXPECT_NE(a.find("less 1.00 GiB of weights"), std::string::npos);
}

void expect_one_line_error(const RunResult& r, const std::string& mentions) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
}

TEST_F(ReportCommand, BadInputIsOneLineAndExitCode2) {
  const std::string plan = reference("stories260k", "plan-320.json");
  const std::string profile = reference("stories260k", "profile.json");
  expect_one_line_error(run_kvplan("report --profile " + out("absent.json") + " --plan " + plan +
                                   " -o " + out("r.html")),
                        "absent.json");
  std::ofstream(out("garbled.json")) << "{\"schema\": \"kvplan.profile/v1\", \"model\": [";
  expect_one_line_error(run_kvplan("report --profile " + out("garbled.json") + " --plan " + plan +
                                   " -o " + out("r.html")),
                        "garbled.json");
  std::ofstream(out("wrong.json")) << "{\"schema\": \"kvplan.plan/v1\"}";
  expect_one_line_error(run_kvplan("report --profile " + profile + " --plan " + out("wrong.json") +
                                   " -o " + out("r.html")),
                        "wrong.json");
  // A plan for SmolLM2 with the stories260K profile.
  expect_one_line_error(
      run_kvplan("report --profile " + profile + " --plan " +
                 reference("smollm2-135m", "plan-6480.json") + " -o " + out("r.html")),
      "fingerprint");
  expect_one_line_error(run_kvplan("report --profile " + profile + " --plan " + plan +
                                   " --format pdf -o " + out("r.html")),
                        "--format");
  expect_one_line_error(run_kvplan("report --profile " + profile + " --plan " + plan +
                                   " --context 0 -o " + out("r.html")),
                        "--context");
  EXPECT_FALSE(fs::exists(out("r.html"))) << "nothing is written on bad input";
}

}  // namespace
}  // namespace kvplan::test
