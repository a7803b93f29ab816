#include <filesystem>
#include <fstream>
#include <set>

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

int count_occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class TuneCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = models_dir() / "stories260K.gguf";
    KVPLAN_NEED_FILE(model_, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
    dir_ = fs::temp_directory_path() / ("kvplan_tune_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string tune(const std::string& out, const std::string& extra = "",
                   const std::string& budget = "--max-bits 8") {
    // Short windows of the default selection and report texts keep the test quick.
    return "-q tune --model " + model_.string() + " --num-prompts 8 --max-tokens 64 " +
           "--population 16 --generations 40 --ctx 128 " + budget + " -o " + (dir_ / out).string() +
           " " + extra;
  }
  fs::path model_, dir_;
};

TEST_F(TuneCommand, PlanBeatsUniformWithinBudgetAndIsReproducible) {
  const RunResult r =
      run_kvplan(tune("a.json", "--profile-out " + (dir_ / "profile.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = read_json(dir_ / "a.json");
  EXPECT_EQ(plan["schema"], "kvplan.plan/v2");
  // --max-bits is effective bits: stories260K has 5 layers x 4 KV heads x 8 x (K + V) = 320
  // values per token, so 8 bits is 320 bytes.
  EXPECT_LE(plan["summary"]["bytes_per_token"].get<double>(), 320.0 + 1e-9);
  EXPECT_LE(plan["summary"]["effective_bits"].get<double>(), 8.0 + 1e-9);
  EXPECT_TRUE(plan["quality"]["validated"].get<bool>());
  EXPECT_EQ(plan["quality"]["data"]["source"], "report.jsonl");
  EXPECT_EQ(plan["quality"]["selection"]["source"], "selection.jsonl");
  const double kl = plan["quality"]["mean_kl"].get<double>();
  double best_uniform = 1e300;
  ASSERT_FALSE(plan["baselines"].empty());
  for (const auto& b : plan["baselines"]) {
    ASSERT_TRUE(b["within_budget"].get<bool>());
    best_uniform = std::min(best_uniform, b["mean_kl"].get<double>());
    const auto& d = b["kl_difference"];
    EXPECT_LE(d["low"].get<double>(), d["plan_minus_baseline"].get<double>());
    EXPECT_GE(d["high"].get<double>(), d["plan_minus_baseline"].get<double>());
    EXPECT_NEAR(d["plan_minus_baseline"].get<double>(), kl - b["mean_kl"].get<double>(), 1e-9);
    // On the report text (1,270 scored tokens here) the plan may not be worse than any uniform
    // configuration of its budget beyond the noise its interval shows.
    EXPECT_NE(d["verdict"], "plan higher") << b["kv"];
  }
  EXPECT_EQ(plan["quality"]["best_uniform"]["mean_kl"].get<double>(), best_uniform);
  // Headroom: the additive surrogate's best plan within the budget against the uniform pair it
  // predicts best, which is the least predicted among every uniform pair the plan lists. A
  // uniform pair is one plan of the space, so the ratio is at most 1; the plan's own prediction
  // is no better than the exact front's end.
  const auto& headroom = plan["quality"]["allocation_headroom"];
  double least_predicted = 1e300;
  std::string least_predicted_pair;
  for (const auto* list :
       {&plan["baselines"], &plan["provenance"]["uniform_not_measured_on_report"]}) {
    for (const auto& b : *list) {
      if (b["predicted_error"].get<double>() < least_predicted) {
        least_predicted = b["predicted_error"].get<double>();
        least_predicted_pair = b["kv"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(headroom["best_uniform"], least_predicted_pair) << headroom.dump();
  EXPECT_EQ(headroom["best_uniform_predicted"].get<double>(), least_predicted);
  const double best_plan_predicted = headroom["best_plan_predicted"].get<double>();
  EXPECT_GT(best_plan_predicted, 0.0);
  EXPECT_LE(best_plan_predicted, least_predicted);
  EXPECT_LE(best_plan_predicted, plan["quality"]["predicted_error"].get<double>() * (1 + 1e-12));
  EXPECT_DOUBLE_EQ(headroom["ratio"].get<double>(), best_plan_predicted / least_predicted);
  // Long context: the plan and the best uniform pair at 256 and 2,048 tokens (stories260K's
  // context is 2,048, so 8,192 is left out), about 8,192 tokens run per context.
  const auto& lc = plan["quality"]["long_context"];
  EXPECT_EQ(lc["baseline"], plan["quality"]["best_uniform"]["kv"]);
  ASSERT_EQ(lc["rows"].size(), 2u) << lc.dump();
  EXPECT_EQ(lc["rows"][0]["ctx"], 256);
  EXPECT_EQ(lc["rows"][0]["chunks"], 32);
  EXPECT_EQ(lc["rows"][1]["ctx"], 2048);
  for (const auto& row : lc["rows"]) {
    EXPECT_EQ(row["scored"], row["chunks"].get<int>() * (row["ctx"].get<int>() / 2 - 1));
    EXPECT_GT(row["plan_mean_kl"].get<double>(), 0.0);
    EXPECT_GT(row["baseline_mean_kl"].get<double>(), 0.0);
  }
  // The exact front: within the budget, memory up and predicted error down; NSGA-II's beside it.
  double last_memory = -1, last_error = 1e300;
  bool nsga = false;
  for (const auto& p : plan["pareto_front"]) {
    if (p["source"] == "nsga2") {
      nsga = true;
      continue;
    }
    ASSERT_EQ(p["source"], "exact");
    EXPECT_GT(p["memory"].get<double>(), last_memory);
    EXPECT_LT(p["predicted_error"].get<double>(), last_error);
    EXPECT_LE(p["bytes_per_token"].get<double>(), 320.0 + 1e-9);
    last_memory = p["memory"].get<double>();
    last_error = p["predicted_error"].get<double>();
  }
  EXPECT_TRUE(nsga);
  // K and V are chosen independently from the catalogue: a key format and a value format that
  // differ appear in the plan or its front (fp8 beats int4 at the same 8 bytes per row here).
  EXPECT_TRUE(fs::exists(dir_ / "profile.json"));
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
      " --population 16 --generations 40 --ctx 128 --max-bits 8 -o " + (dir_ / "c.json").string());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  auto c = read_json(dir_ / "c.json");
  c.erase("created");
  EXPECT_EQ(a, c);
  // --measurements: the same plan; run again, every measurement is read back (none is added).
  const fs::path cells = dir_ / "measurements.jsonl";
  const auto search_with_cells = [&](const std::string& out) {
    const RunResult m = run_kvplan("-q search --profile " + (dir_ / "profile.json").string() +
                                   " --model " + model_.string() +
                                   " --population 16 --generations 40 --ctx 128 --max-bits 8 -o " +
                                   (dir_ / out).string() + " --measurements " + cells.string());
    EXPECT_EQ(m.exit_code, 0) << m.err;
    auto j = read_json(dir_ / out);
    j.erase("created");
    return j;
  };
  EXPECT_EQ(a, search_with_cells("d.json"));
  const std::string measured = slurp(cells);
  EXPECT_GT(count_occurrences(measured, "\"key\""), 10) << measured;
  EXPECT_EQ(a, search_with_cells("e.json"));
  EXPECT_EQ(slurp(cells), measured);
  // Exports. KVTuner's YAML holds int bits: a plan with none of int8/int4/int2 is refused in one
  // line; otherwise its other formats take the nearest int bits.
  const RunResult yaml =
      run_kvplan("export --plan " + (dir_ / "a.json").string() + " --to kvtuner-yaml");
  bool any_int = false;
  for (const auto& l : plan["layers"]) {
    for (const char* side : {"key", "value"}) {
      const std::string f = l[side].get<std::string>();
      any_int = any_int || f == "int8" || f == "int4" || f == "int2";
    }
  }
  if (any_int) {
    ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
    EXPECT_NE(yaml.out.find("nbits_key"), std::string::npos);
  } else {
    EXPECT_EQ(yaml.exit_code, 2) << yaml.err;
    EXPECT_EQ(count_lines(yaml.err), 1) << yaml.err;
    EXPECT_NE(yaml.err.find("KVTuner"), std::string::npos) << yaml.err;
  }
  // vLLM maps a plan with one side it stores; a plan with none is refused, naming the search.
  const RunResult vllm = run_kvplan("export --plan " + (dir_ / "a.json").string() + " --to vllm");
  bool any_vllm_side = false;
  for (const auto& l : plan["layers"]) {
    for (const char* side : {"key", "value"}) {
      const std::string f = l[side].get<std::string>();
      any_vllm_side = any_vllm_side || f == "bf16" || f == "f16" || f.starts_with("fp8");
    }
  }
  if (any_vllm_side) {
    EXPECT_EQ(vllm.exit_code, 0) << vllm.err;
  } else {
    EXPECT_EQ(vllm.exit_code, 2) << vllm.err;
    EXPECT_EQ(count_lines(vllm.err), 1) << vllm.err;
    EXPECT_NE(vllm.err.find("kvplan search --engine vllm"), std::string::npos) << vllm.err;
  }
  // head_dim 8: llama.cpp's block types cannot hold the rows, said in one line.
  const RunResult llama =
      run_kvplan("export --plan " + (dir_ / "a.json").string() + " --to llamacpp");
  EXPECT_EQ(llama.exit_code, 2);
  EXPECT_EQ(count_lines(llama.err), 1);
}

// --engine vllm: only what vLLM runs (one dtype per layer, fp8 or the model's 16-bit dtype), so
// the export to vLLM changes no layer's format; llama.cpp's cache types cannot hold head_dim 8.
TEST_F(TuneCommand, EngineSearchGivesAPlanTheEngineRunsAsItIs) {
  const RunResult r =
      run_kvplan(tune("v.json", "--engine vllm --profile-out " + (dir_ / "profile.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = read_json(dir_ / "v.json");
  EXPECT_EQ(plan["provenance"]["engine"], "vllm");
  std::set<std::string> quantized;
  for (const auto& l : plan["layers"]) {
    const std::string k = l["key"].get<std::string>(), v = l["value"].get<std::string>();
    EXPECT_EQ(k, v) << "vLLM stores one dtype per layer";
    if (k != "f16" && k != "bf16") quantized.insert(k);
  }
  EXPECT_LE(quantized.size(), 1u);
  const RunResult e =
      run_kvplan("export --json --plan " + (dir_ / "v.json").string() + " --to vllm");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  for (const auto& loss : nlohmann::json::parse(e.out)["losses"]) {
    EXPECT_NE(loss["field"].get<std::string>().find("scales"), std::string::npos) << loss;
  }
  // What vLLM runs of its own plan, measured on the report text against the plan: the same pairs
  // give the same KL and bytes.
  const RunResult measured =
      run_kvplan("-q export --json --plan " + (dir_ / "v.json").string() +
                 " --to vllm --measure --ctx 128 "
                 "--profile " +
                 (dir_ / "profile.json").string() + " --model " + model_.string());
  ASSERT_EQ(measured.exit_code, 0) << measured.err;
  const auto m = nlohmann::json::parse(measured.out)["measured"];
  EXPECT_EQ(m["report"], "report.jsonl");
  EXPECT_GT(m["plan_mean_kl"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(m["engine_mean_kl"].get<double>(), m["plan_mean_kl"].get<double>());
  EXPECT_DOUBLE_EQ(m["engine_bytes_per_token"].get<double>(),
                   m["plan_bytes_per_token"].get<double>());
  // --measure without the profile it needs: one line, exit 2.
  const RunResult no_profile =
      run_kvplan("export --plan " + (dir_ / "v.json").string() + " --to vllm --measure");
  EXPECT_EQ(no_profile.exit_code, 2);
  EXPECT_NE(no_profile.err.find("--profile"), std::string::npos) << no_profile.err;
  // The same search for an unknown engine: one line, exit 2.
  const RunResult b = run_kvplan(tune("b.json", "--engine sglang"));
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_EQ(count_lines(b.err), 1) << b.err;
  EXPECT_FALSE(fs::exists(dir_ / "b.json"));
  const RunResult to = run_kvplan("export --plan " + (dir_ / "v.json").string() + " --to sglang");
  EXPECT_EQ(to.exit_code, 2);
  EXPECT_NE(to.err.find("ik-llamacpp"), std::string::npos) << to.err;
}

// vLLM TurboQuant: one preset on every quantized layer, the boundary layers (stories260K has 5:
// 0, 1, 3, 4) at the model's dtype, and an export vLLM takes as it is.
TEST_F(TuneCommand, TurboquantSearchKeepsBoundaryLayersAndOnePreset) {
  const RunResult r = run_kvplan(tune("tq.json", "--engine vllm-turboquant", "--max-bits 14"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = read_json(dir_ / "tq.json");
  EXPECT_EQ(plan["provenance"]["engine"], "vllm-turboquant");
  std::set<std::string> presets;
  for (const auto& l : plan["layers"]) {
    const std::string k = l["key"].get<std::string>(), v = l["value"].get<std::string>();
    const int index = l["index"].get<int>();
    if (index != 2) {
      EXPECT_TRUE((k == "f16" || k == "bf16") && k == v) << "boundary layer " << index;
    } else if (k != "f16" && k != "bf16") {
      presets.insert(k + "/" + v);
    }
  }
  EXPECT_EQ(presets.size(), 1u);
  const RunResult e =
      run_kvplan("export --json --plan " + (dir_ / "tq.json").string() + " --to vllm-turboquant");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto out = nlohmann::json::parse(e.out);
  EXPECT_TRUE(out["losses"].empty()) << out["losses"];
  EXPECT_NE(out["text"].get<std::string>().find("--kv-cache-dtype-skip-layers 0 1 3 4"),
            std::string::npos)
      << out["text"];
  // Below the boundary layers' own bytes (4 of 5 layers at 16 bits): one line, exit 2.
  const RunResult low = run_kvplan(tune("low.json", "--engine vllm-turboquant", "--max-bits 12"));
  EXPECT_EQ(low.exit_code, 2);
  EXPECT_NE(low.err.find("vLLM TurboQuant keeps layers 0, 1, 3, 4 at the model's dtype"),
            std::string::npos)
      << low.err;
  EXPECT_FALSE(fs::exists(dir_ / "low.json"));
}

TEST_F(TuneCommand, BadBudgetsAndMismatchedProfilesAreRefused) {
  RunResult r = run_kvplan(tune("x.json", "", "--gpu-memory 8GiB"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_kvplan("-q tune --model " + model_.string() + " --max-bits 8 --population 30 -o " +
                 (dir_ / "y.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("population"), std::string::npos) << r.err;
  // --device is checked before the model is profiled.
  r = run_kvplan(tune("d.json", "--device gpu:x"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "d.json"));
  // A budget below the smallest plan is refused before profiling, naming the smallest feasible
  // size: int2_kivi keys (4 heads x 8 channels x 12 B per 32 tokens = 12 B/token) and tq_mse3
  // values (4 heads x (3 B of 3-bit codes + a 2 B norm)) on 5 layers, 160 B/token.
  r = run_kvplan(tune("small.json", "", "--max-bits 3.5"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_occurrences(r.err, "kvplan: error:"), 1) << r.err;
  EXPECT_NE(r.err.find("smallest possible plan"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("160 bytes per token"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "small.json"));
  // A --measurements file that is not one is refused, naming its line, before the profile.
  { std::ofstream(dir_ / "cells.jsonl") << "{\"kvplan_measurements\": 1}\n{\"key\": 3}\n"; }
  r = run_kvplan(tune("m.json", "--profile-out " + (dir_ / "m-profile.json").string() +
                                    " --measurements " + (dir_ / "cells.jsonl").string()));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_occurrences(r.err, "kvplan: error:"), 1) << r.err;
  EXPECT_NE(r.err.find("cells.jsonl:2: field 'key': expected a string"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "m-profile.json"));
  EXPECT_FALSE(fs::exists(dir_ / "m.json"));
  // Overlapping text sets are refused naming both files.
  {
    std::ofstream sel(dir_ / "sel.jsonl");
    std::ifstream rep(fs::path(KVPLAN_SOURCE_DIR) / "configs" / "calibration" / "report.jsonl");
    std::string line;
    std::getline(rep, line);
    sel << "{\"text\": \"A short sample of our own about tide pools and crabs.\"}\n"
        << line << "\n";
  }
  r = run_kvplan(tune("o.json", "--selection " + (dir_ / "sel.jsonl").string()));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_occurrences(r.err, "kvplan: error:"), 1) << r.err;
  EXPECT_NE(r.err.find("sel.jsonl (line 2)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("report.jsonl (line 1)"), std::string::npos) << r.err;
  const fs::path smol = smollm2_path();
  ASSERT_EQ(run_kvplan(tune("z.json", "--profile-out " + (dir_ / "p.json").string())).exit_code, 0);
  KVPLAN_NEED_FILE(smol,
                   "the cross-model check needs SmolLM2: "
                   "run scripts/models/fetch-smollm2.sh (or set KVPLAN_CACHE)");
  r = run_kvplan("-q search --profile " + (dir_ / "p.json").string() + " --model " + smol.string() +
                 " --max-bits 8 -o " + (dir_ / "w.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "w.json"));
}

// The profile records no windows: the plan takes the model's, so that estimates, reports and the
// runtime count a sliding layer's window (the tiny transformers Mistral of tests/fixtures/hf slides
// over 8 tokens on both layers).
TEST(TuneCommandWindows, PlanOfASlidingWindowModelRecordsItsWindows) {
  const fs::path model = fs::path(KVPLAN_SOURCE_DIR) / "tests" / "fixtures" / "hf" / "mistral";
  const fs::path plan =
      fs::temp_directory_path() / ("kvplan_tune_windows_" + std::to_string(::getpid()) + ".json");
  const RunResult r =
      run_kvplan("-q tune --model " + model.string() +
                 " --num-prompts 8 --max-tokens 64 --population 16 --generations 40 "
                 "--ctx 128 --max-bits 8 --long-context-tokens 0 -o " +
                 plan.string() + " --profile-out " + plan.string() + ".profile");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_json(plan);
  fs::remove(plan);
  fs::remove(plan.string() + ".profile");
  EXPECT_EQ(j["model"]["sliding_window"], nlohmann::json::array({8, 8}));
}

}  // namespace
}  // namespace kvplan::test
