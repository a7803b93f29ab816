// `kvplan profile` end to end: a tiny run on stories260K, shards + merge through the CLI, and bad
// input giving exit code 2 with one line naming the file or field.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"
#include "test_paths.h"

namespace kvplan {
namespace {

namespace fs = std::filesystem;

class ProfileCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = (test::models_dir() / "stories260K.gguf").string();
    KVPLAN_NEED_FILE(model_, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
    dir_ = fs::temp_directory_path() / ("kvplan_profile_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string common() const {
    return "-q profile --model " + model_ + " --num-prompts 4 --max-tokens 32 --kl-prompts 2 " +
           "--candidates KV8,KV4";
  }
  static void write(const std::string& p, const std::string& text) { std::ofstream(p) << text; }
  static void expect_bad_input(const test::RunResult& r, const std::string& fragment) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(test::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  }
  std::string model_;
  fs::path dir_;
};

TEST_F(ProfileCommand, FormatsListSetsTheSideCatalogueAndLeavesOutBlocksTheRowsCannotHold) {
  // stories260K's head_dim is 8: nvfp4's 16-value groups cannot pack its rows, so it is left out
  // for keys and values; int4 and int8 are profiled for each side against exact f32, with the
  // joint anchor pair KV4.
  const std::string base =
      "-q profile --model " + model_ + " --num-prompts 4 --max-tokens 32 --kl-prompts 2 ";
  const test::RunResult r =
      test::run_kvplan(base + "--formats int4,nvfp4,int8 -o " + path("f.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json p = nlohmann::json::parse(std::ifstream(path("f.json")));
  std::set<std::string> candidates;
  for (const auto& c : p["candidates"]) candidates.insert(c.get<std::string>());
  EXPECT_EQ(candidates,
            (std::set<std::string>{"int4/f32", "int8/f32", "f32/int4", "f32/int8", "KV4"}))
      << p["candidates"].dump();

  expect_bad_input(test::run_kvplan(base + "--formats int4,bogus -o " + path("g.json")), "bogus");
  expect_bad_input(test::run_kvplan(base + "--formats int4,int4 -o " + path("g.json")),
                   "listed twice");
  expect_bad_input(test::run_kvplan(base + "--formats f32 -o " + path("g.json")), "f32");
  expect_bad_input(test::run_kvplan(base + "--formats int4 --candidates KV8 -o " + path("g.json")),
                   "--formats and --candidates");
  // Found once the model is loaded, after the calibration's warnings.
  const test::RunResult none = test::run_kvplan(base + "--formats nvfp4 -o " + path("g.json"));
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("no candidate format can pack this model's key rows (head_dim 8)"),
            std::string::npos)
      << none.err;
  EXPECT_FALSE(fs::exists(path("g.json")));
}

TEST_F(ProfileCommand, ShardsMergeToTheUnshardedFile) {
  const auto whole = test::run_kvplan(common() + " -o " + path("whole.json") + " --json");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto summary = nlohmann::json::parse(whole.out);
  EXPECT_TRUE(summary["complete"].get<bool>());
  std::string merge = "-q profile merge -o " + path("merged.json");
  for (int i = 0; i < 3; ++i) {
    const std::string out = path("s" + std::to_string(i) + ".json");
    const auto r = test::run_kvplan(common() + " --shard " + std::to_string(i) + "/3 -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    merge += " " + out;
  }
  const auto m = test::run_kvplan(merge);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  auto a = nlohmann::json::parse(test::slurp(path("whole.json")));
  auto b = nlohmann::json::parse(test::slurp(path("merged.json")));
  a.erase("timings");
  b.erase("timings");
  EXPECT_EQ(a.dump(1), b.dump(1));

  // A shard from other settings is refused naming the file and the field.
  const auto other =
      test::run_kvplan(common() + " --group-size 4 --shard 2/3 -o " + path("other.json"));
  ASSERT_EQ(other.exit_code, 0) << other.err;
  expect_bad_input(
      test::run_kvplan("-q profile merge -o " + path("x.json") + " " + path("s0.json") + " " +
                       path("s1.json") + " " + path("other.json")),
      "quantization.group_size");
  EXPECT_FALSE(fs::exists(path("x.json")));
  // Resuming a finished profile computes nothing and keeps the bytes.
  const auto again = test::run_kvplan(common() + " --resume -o " + path("whole.json"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto c = nlohmann::json::parse(test::slurp(path("whole.json")));
  c.erase("timings");
  EXPECT_EQ(a.dump(1), c.dump(1));
}

// The summary's text and JSON, byte for byte, on the committed stories260K profile "merged" alone
// (a merge keeps every number, so the output does not depend on this machine).
TEST_F(ProfileCommand, MergeOfTheCommittedProfilePrintsItsSummary) {
  const std::string committed =
      std::string(KVPLAN_SOURCE_DIR) + "/data/reference/stories260k/profile.json";
  const std::string out = path("m.json");
  const test::RunResult text = test::run_kvplan("-q profile merge -o " + out + " " + committed);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out,
            "merged       1 shards -> " + out + "\n" + "profile      " + out +
                " (170/170 cells)\n"
                "model        llama, 5 layers, 34 candidate pairs\n"
                "calibration  default.jsonl: 32 prompts, 4096 tokens (dKL: 8 prompts, 512 "
                "positions)\n"
                "K/V ratio    dkl_int4   186.372  (keys low / values low; > 1: keys more "
                "sensitive)\n"
                "K/V ratio    dkl_int2   30.164  (keys low / values low; > 1: keys more "
                "sensitive)\n"
                "K/V ratio    e_o_int4   9.993  (keys low / values low; > 1: keys more "
                "sensitive)\n"
                "K/V ratio    e_o_int2   5.362  (keys low / values low; > 1: keys more "
                "sensitive)\n"
                "dKL          re-run for 15 cells, estimated from o_mse for the other 155\n"
                "additivity   joint pair vs its key + value sides: mean 0.6 %, worst 1.2 % "
                "(layer 0, KV4) over 5 layers\n"
                "8<4<2 bits   every metric, every layer\n");
  const test::RunResult json =
      test::run_kvplan("-q profile merge --json -o " + out + " " + committed);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const std::string head = R"({
  "output_cells": 170,
  "total_cells": 170,
  "complete": true,
  "key_value_ratio": {
    "dkl_int4": 186.37213752897568,
    "dkl_int2": 30.16391742923296,
    "e_o_int4": 9.993282520908927,
    "e_o_int2": 5.36229260563167
  },
  "additivity": {
    "joint_cells": 5,
    "mean_abs_rel_error": 0.005989882321112398,
    "max_abs_rel_error": 0.011915392344516747,
    "worst_layer": 0,
    "worst_pair": "KV4"
  },
  "dkl_measured_cells": 15,
  "monotonic_kv8_kv4_kv2": true,
  "timings": {
    "shards": [
      {
        "threads": 2,
)";
  EXPECT_EQ(json.out.substr(0, head.size()), head) << json.out;
}

TEST_F(ProfileCommand, BadInputExitsTwoWithOneLine) {
  write(path("empty.txt"), "");
  expect_bad_input(
      test::run_kvplan(common() + " --prompts " + path("empty.txt") + " -o " + path("p.json")),
      "empty.txt: no prompts");
  write(path("bad.jsonl"), "{\"text\": \"fine\"}\n{\"txt\": 1}\n");
  expect_bad_input(
      test::run_kvplan(common() + " --prompts " + path("bad.jsonl") + " -o " + path("p.json")),
      "bad.jsonl:2");
  expect_bad_input(test::run_kvplan(common() + " --shard 3/3 -o " + path("p.json")), "--shard");
  expect_bad_input(
      test::run_kvplan("-q profile --model " + model_ + " --candidates K8V5 -o " + path("p.json")),
      "K8V5");
  write(path("notprofile.json"), "{\"schema\": \"kvplan.plan/v1\"}");
  expect_bad_input(
      test::run_kvplan("-q profile merge -o " + path("m.json") + " " + path("notprofile.json")),
      "notprofile.json: field 'schema'");
  EXPECT_FALSE(fs::exists(path("p.json")));
  // --resume against a profile of other settings.
  ASSERT_EQ(test::run_kvplan(common() + " -o " + path("r.json")).exit_code, 0);
  // (The calibration warnings come first here: the check needs the tokenized prompts.)
  const auto r = test::run_kvplan(common() + " --mode kivi --resume -o " + path("r.json"));
  EXPECT_EQ(r.exit_code, 2);
  const std::string last = r.err.substr(r.err.rfind("kvplan: error:"));
  EXPECT_EQ(test::count_lines(last), 1) << r.err;
  EXPECT_NE(last.find("quantization.mode"), std::string::npos) << r.err;
}

TEST_F(ProfileCommand, TruncationWarnsAndHelpHasAnExample) {
  const auto r = test::run_kvplan("-q profile --model " + model_ +
                                  " --num-prompts 2 --max-tokens 8 --kl-prompts 1 --candidates "
                                  "KV8 -o " +
                                  path("t.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("truncated to 8 tokens"), std::string::npos) << r.err;
  const auto h = test::run_kvplan("profile --help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("Example: kvplan profile"), std::string::npos);
}

}  // namespace
}  // namespace kvplan
