// Each engine's export checked against the grammar the engine documents. The flag names and value
// sets are written here with their sources (docs/engines.md quotes them):
// - llama.cpp: -ctk/-ctv TYPE, TYPE from kv_cache_types in common/arg.cpp; -fa on for a
//   quantized V (src/llama-context.cpp); the environment variable LLAMA_ATTN_ROT_DISABLE (any
//   value) turns off its K/V rotation (PR #21038, src/llama-kv-cache.cpp);
// - ik_llama.cpp: -ctk-first/-ctk-last/-ctv-first/-ctv-last TYPE,N (PR #1599), TYPE from
//   llama-bench's ggml_type_from_name; -fa, -khad and -vhad are switches (common/common.cpp);
// - vLLM: --kv-cache-dtype from CacheDType (vllm/config/cache.py), --kv-cache-dtype-skip-layers
//   with space-separated layer indices (argparse nargs="+", docs "Quantized KV Cache");
// - vLLM TurboQuant: --kv-cache-dtype turboquant_{k8v4,4bit_nc,k3v4_nc,3bit_nc} (TQ_PRESETS in
//   turboquant/config.py: K/V bits 8/4, 4/4, 3/4, 3/3), the first and last two layers added to
//   the skip list by vLLM itself (engine/arg_utils.py, get_boundary_skip_layers) — vLLM 0.34.0;
// - TensorRT-LLM: kv_cache_config.dtype "0-3:fp8,4-35:nvfp4" (PR #13695);
// - ModelOpt: kv_cache_quant_algo, kv_cache_quantized_layers {"model.layers.N.self_attn":
//   {"quant_algo": "FP8" | "NVFP4"}}, kv_cache_schema_version 1 (Model-Optimizer
//   tests/unit/torch/export/test_convert_hf_config.py).
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engines/exporters.h"
#include "engines/plan_fixtures.h"

namespace kvplan {
namespace {

const std::string kLlamaTypes = "(f32|f16|bf16|q8_0|q4_0|q4_1|iq4_nl|q5_0|q5_1)";
const std::string kIkTypes = "(f32|f16|bf16|q8_0|q4_0|q4_1|iq4_nl|q5_0|q5_1|q6_0|q8_KV)";
const std::string kVllmDtypes =
    "(auto|float16|bfloat16|fp8|fp8_e4m3|fp8_e5m2|fp8_inc|fp8_ds_mla|nvfp4_ds_mla|"
    "turboquant_k8v4|turboquant_4bit_nc|turboquant_k3v4_nc|turboquant_3bit_nc|"
    "int4_per_token_head|int8_per_token_head|fp8_per_token_head|nvfp4|nvfp4_4over6)";
const std::string kTrtDtypes = "(fp8|nvfp4|float16|bfloat16|auto)";

using test::plan_with;

bool matches(const std::string& text, const std::string& pattern) {
  return std::regex_match(text, std::regex(pattern));
}

// ik_llama.cpp's flags read back into per-layer K and V types, as PR #1599 applies them.
std::vector<std::pair<std::string, std::string>> read_ik_flags(const std::string& text, int n) {
  std::istringstream in(text);
  std::map<std::string, std::string> flags;
  std::string flag, value;
  while (in >> flag) {
    if (flag == "-fa") continue;
    in >> value;
    flags[flag] = value;
  }
  std::vector<std::pair<std::string, std::string>> layers(n, {flags["-ctk"], flags["-ctv"]});
  const auto apply = [&](const char* name, bool first, bool key) {
    if (!flags.contains(name)) return;
    const std::string& v = flags[name];
    const std::string type = v.substr(0, v.find(','));
    const int count = std::stoi(v.substr(v.find(',') + 1));
    for (int i = 0; i < count; ++i) {
      auto& layer = layers[static_cast<size_t>(first ? i : n - 1 - i)];
      (key ? layer.first : layer.second) = type;
    }
  };
  apply("-ctk-first", true, true);
  apply("-ctk-last", false, true);
  apply("-ctv-first", true, false);
  apply("-ctv-last", false, false);
  return layers;
}

TEST(EngineExports, IkLlamaCppFlagsFollowPr1599AndReadBackToThePlan) {
  const Plan plan = plan_with({"q8_0/q8_0", "q8_0/q4_0", "q4_0/q4_0", "q4_0/q4_0", "q4_0/q4_0",
                               "q5_0/iq4_nl", "q5_0/iq4_nl"});
  const PlanExport e = export_ik_llamacpp(plan);
  const std::string t = kIkTypes;
  EXPECT_TRUE(matches(e.text, "-ctk " + t + " -ctv " + t + "( -ctk-first " + t +
                                  ",[0-9]+)?( -ctk-last " + t + ",[0-9]+)?( -ctv-first " + t +
                                  ",[0-9]+)?( -ctv-last " + t + ",[0-9]+)?( -fa)?"))
      << e.text;
  EXPECT_EQ(e.text,
            "-ctk q4_0 -ctv q4_0 -ctk-first q8_0,2 -ctk-last q5_0,2 -ctv-first q8_0,1 "
            "-ctv-last iq4_nl,2 -fa");
  EXPECT_TRUE(e.exact());
  const auto layers = read_ik_flags(e.text, 7);
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    EXPECT_EQ(layers[i].first, plan.layers[i].pair.key.name()) << i;
    EXPECT_EQ(layers[i].second, plan.layers[i].pair.value.name()) << i;
  }
  // Uniform: no first/last flags.
  EXPECT_EQ(export_ik_llamacpp(plan_with({"q8_0/q8_0", "q8_0/q8_0"})).text,
            "-ctk q8_0 -ctv q8_0 -fa");
  EXPECT_EQ(export_ik_llamacpp(plan_with({"f16/f16", "f16/f16"})).text, "-ctk f16 -ctv f16");
}

// A middle that is not one type takes its widest type (never fewer bits than planned), and
// formats ik_llama.cpp lacks take the nearest it has; every change is listed.
TEST(EngineExports, IkLlamaCppMapsWhatItCannotExpressAndListsIt) {
  const PlanExport e =
      export_ik_llamacpp(plan_with({"q8_0/q8_0", "q4_0/q4_0", "q8_0/q4_0", "q4_0/q4_0", "K8V4"}));
  EXPECT_EQ(e.text, "-ctk q8_0 -ctv q4_0 -ctv-first q8_0,1 -fa");
  EXPECT_FALSE(e.exact());
  std::vector<std::string> changed;
  for (const ExportLoss& l : e.losses) changed.push_back(std::to_string(l.layer) + l.field);
  EXPECT_EQ(changed, (std::vector<std::string>{"1key", "3key", "4key", "4value"}));
  EXPECT_EQ(e.losses[2].planned, "int8");
  EXPECT_EQ(e.losses[2].exported, "q8_0");
  EXPECT_NE(e.losses[2].reason.find("does not store int8"), std::string::npos);
  // Among types of equal bits, the one the plan measured better as a uniform pair.
  Plan measured = plan_with({"KV4", "KV4"});
  measured.results.baselines.push_back({.kv = "q4_0/q4_0", .mean_kl = 0.14});
  measured.results.baselines.push_back({.kv = "iq4_nl/iq4_nl", .mean_kl = 0.09});
  EXPECT_EQ(export_ik_llamacpp(measured).text, "-ctk iq4_nl -ctv iq4_nl -fa");
  EXPECT_EQ(export_ik_llamacpp(plan_with({"KV4", "KV4"})).text, "-ctk q4_0 -ctv q4_0 -fa");
  // Equally wide types between the runs: the most frequent one is kept.
  EXPECT_EQ(export_ik_llamacpp(plan_with({"q8_0/q8_0", "q4_0/q4_0", "iq4_nl/iq4_nl",
                                          "iq4_nl/iq4_nl", "q8_0/q8_0"}))
                .text,
            "-ctk iq4_nl -ctv iq4_nl -ctk-first q8_0,1 -ctk-last q8_0,1 -ctv-first q8_0,1 "
            "-ctv-last q8_0,1 -fa");
}

TEST(EngineExports, TrtllmWritesContiguousDtypeRangesOverEveryLayer) {
  const Plan plan = plan_with({"fp8_e4m3/fp8_e4m3", "fp8_e4m3/fp8_e4m3", "nvfp4/nvfp4",
                               "nvfp4/nvfp4", "bf16/bf16", "nvfp4/nvfp4"});
  const PlanExport e = export_trtllm(plan);
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(e.text, m, std::regex("\nkv_cache_config:\n  dtype: \"([^\"]*)\"\n$")))
      << e.text;
  const std::string ranges = m[1];
  const std::string range = "[0-9]+-[0-9]+:" + kTrtDtypes;
  EXPECT_TRUE(matches(ranges, range + "(," + range + ")*")) << ranges;
  EXPECT_EQ(ranges, "0-1:fp8,2-3:nvfp4,4-4:bfloat16,5-5:nvfp4");
  EXPECT_TRUE(e.exact());
  // K and V of a layer share a dtype: the wider side's, listed.
  const PlanExport mixed = export_trtllm(plan_with({"fp8_e4m3/nvfp4", "q4_0/q4_0"}));
  EXPECT_NE(mixed.text.find("\"0-0:fp8,1-1:nvfp4\""), std::string::npos) << mixed.text;
  ASSERT_EQ(mixed.losses.size(), 3u);
  EXPECT_EQ(mixed.losses[0].field, "value");
  EXPECT_EQ(mixed.losses[0].exported, "fp8_e4m3");
}

TEST(EngineExports, ModeloptPerLayerConfigFollowsSchemaOne) {
  const PlanExport e =
      export_modelopt(plan_with({"fp8_e4m3/fp8_e4m3", "nvfp4/nvfp4", "bf16/bf16", "nvfp4/nvfp4"}));
  const nlohmann::json j = nlohmann::json::parse(e.text);
  const nlohmann::json& q = j.at("quantization");
  EXPECT_EQ(q.at("kv_cache_quant_algo"), "MIXED_PRECISION");
  EXPECT_EQ(q.at("kv_cache_schema_version"), 1);
  const nlohmann::json& layers = q.at("kv_cache_quantized_layers");
  ASSERT_EQ(layers.size(), 3u);  // the bf16 layer is not KV-quantized: not listed
  for (const auto& [prefix, cfg] : layers.items()) {
    EXPECT_TRUE(matches(prefix, "model\\.layers\\.[0-9]+\\.self_attn")) << prefix;
    EXPECT_TRUE(matches(cfg.at("quant_algo").get<std::string>(), "FP8|NVFP4"));
  }
  EXPECT_EQ(layers.at("model.layers.1.self_attn").at("quant_algo"), "NVFP4");
  EXPECT_FALSE(layers.contains("model.layers.2.self_attn"));
  EXPECT_TRUE(e.exact());
  // One algorithm on every layer: that algorithm, as a uniform ModelOpt export names it.
  const nlohmann::json uniform =
      nlohmann::json::parse(export_modelopt(plan_with({"nvfp4/nvfp4", "nvfp4/nvfp4"})).text);
  EXPECT_EQ(uniform.at("quantization").at("kv_cache_quant_algo"), "NVFP4");
}

TEST(EngineExports, VllmAndLlamaCppTextsFollowTheirGrammars) {
  const PlanExport v =
      export_vllm(plan_with({"bf16/bf16", "nvfp4/nvfp4", "nvfp4/nvfp4", "bf16/bf16"}));
  EXPECT_TRUE(matches(
      v.text, "--kv-cache-dtype " + kVllmDtypes + "( --kv-cache-dtype-skip-layers( [0-9]+)+)?"))
      << v.text;
  EXPECT_EQ(v.text, "--kv-cache-dtype nvfp4 --kv-cache-dtype-skip-layers 0 3");
  EXPECT_TRUE(v.exact());
  const PlanExport per_token = export_vllm(plan_with({"fp8_per_token_head/fp8_per_token_head"}));
  EXPECT_EQ(per_token.text, "--kv-cache-dtype fp8_per_token_head");
  const PlanExport int8 = export_vllm(plan_with({"int8_per_token_head/int8_per_token_head"}));
  EXPECT_EQ(int8.text, "--kv-cache-dtype int8_per_token_head");
  EXPECT_TRUE(int8.exact());
  Plan p = plan_with({"q8_0/q4_0", "q8_0/q4_0"});
  p.results.baselines.push_back({.kv = "q8_0/q4_0", .mean_kl = 0.01});
  const PlanExport l = export_llamacpp(p);
  EXPECT_TRUE(matches(l.text, "(export LLAMA_ATTN_ROT_DISABLE=1\n)?-ctk " + kLlamaTypes + " -ctv " +
                                  kLlamaTypes + "( -fa on)?"))
      << l.text;
  Plan rotated = plan_with({"q8_0_had/q4_0_had", "q8_0_had/q4_0_had"});
  rotated.results.baselines.push_back({.kv = "q8_0_had/q4_0_had", .mean_kl = 0.01});
  const PlanExport r = export_llamacpp(rotated);
  EXPECT_TRUE(matches(r.text, "-ctk " + kLlamaTypes + " -ctv " + kLlamaTypes + "( -fa on)?"))
      << r.text;
  EXPECT_TRUE(r.exact());
}

// -khad/-vhad rotate one side on every layer: a side's rotated types are given as their plain
// cache types with the switch, and a side mixing rotated and unrotated quantized types takes the
// setting that keeps most of it.
TEST(EngineExports, IkLlamaCppSwitchesRotationPerSide) {
  const PlanExport keys = export_ik_llamacpp(
      plan_with({"q8_0_had/q8_0", "q4_0_had/q4_0", "q4_0_had/q4_0", "q4_0_had/q4_0"}));
  EXPECT_EQ(keys.text, "-ctk q4_0 -ctv q4_0 -ctk-first q8_0,1 -ctv-first q8_0,1 -khad -fa");
  EXPECT_TRUE(keys.exact());
  EXPECT_TRUE(matches(keys.text, "-ctk " + kIkTypes + " -ctv " + kIkTypes +
                                     "( -ct[kv]-(first|last) " + kIkTypes +
                                     ",[0-9]+)*( -khad)?( -vhad)?( -fa)?"))
      << keys.text;
  EXPECT_EQ(export_ik_llamacpp(plan_with({"f16/iq4_nl_had", "f16/iq4_nl_had"})).text,
            "-ctk f16 -ctv iq4_nl -vhad -fa");
  EXPECT_EQ(export_ik_llamacpp(plan_with({"iq4_nl_had/iq4_nl_had"})).text,
            "-ctk iq4_nl -ctv iq4_nl -khad -vhad -fa");
  // Keys: three layers rotated, one not: -khad, and the unrotated layer takes q4_0's twin.
  const PlanExport mixed =
      export_ik_llamacpp(plan_with({"q4_0_had/f16", "q4_0_had/f16", "q4_0/f16", "q4_0_had/f16"}));
  EXPECT_EQ(mixed.text, "-ctk q4_0 -ctv f16 -khad");
  ASSERT_EQ(mixed.losses.size(), 1u);
  EXPECT_EQ(mixed.losses[0].layer, 2);
  EXPECT_EQ(mixed.losses[0].exported, "q4_0_had");
  // head_dim 96 is not rotated whole by ik_llama.cpp: rotated types map to plain ones.
  const PlanExport odd = export_ik_llamacpp(plan_with({"q8_0_had/q8_0_had"}, 96));
  EXPECT_EQ(odd.text, "-ctk q8_0 -ctv q8_0 -fa");
  EXPECT_EQ(odd.losses.size(), 2u);
}

TEST(EngineExports, VllmTurboquantTakesOnePresetAndSkipsItsBoundaryLayers) {
  // A plan TurboQuant runs as it is: k3v4_nc on the middle layers, bf16 at the boundary.
  const Plan exact = plan_with({"bf16/bf16", "bf16/bf16", "tq_mse3/tq_int4", "tq_mse3/tq_int4",
                                "bf16/bf16", "tq_mse3/tq_int4", "bf16/bf16", "bf16/bf16"},
                               128);
  const PlanExport e = export_plan(exact, EngineId::kVllmTurboquant);
  EXPECT_TRUE(matches(
      e.text, "--kv-cache-dtype " + kVllmDtypes + " --kv-cache-dtype-skip-layers [0-9]+( [0-9]+)*"))
      << e.text;
  EXPECT_EQ(e.text, "--kv-cache-dtype turboquant_k3v4_nc --kv-cache-dtype-skip-layers 0 1 4 6 7");
  EXPECT_TRUE(e.exact()) << e.losses.size();
  // Another plan maps: each quantized layer to the smallest preset at or above its bits (q8_0 ->
  // FP8 keys; 4-bit values -> tq_int4), the boundary layers to bf16, every loss listed.
  const Plan mapped = plan_with({"q4_0/q4_0", "bf16/bf16", "q8_0/q4_0", "q8_0/q4_0", "tq_mse4/int4",
                                 "q8_0/q4_0", "q4_0/q4_0", "q4_0/q4_0"},
                                128);
  const PlanExport m = export_plan(mapped, EngineId::kVllmTurboquant);
  EXPECT_EQ(m.text, "--kv-cache-dtype turboquant_k8v4 --kv-cache-dtype-skip-layers 0 1 6 7");
  ASSERT_EQ(m.runs.size(), 8u);
  EXPECT_EQ(m.runs[0], KvPair::parse("bf16/bf16"));
  EXPECT_EQ(m.runs[4], KvPair::parse("tq_fp8/tq_int4"));
  EXPECT_FALSE(m.exact());
  bool boundary_loss = false;
  for (const auto& loss : m.losses) {
    boundary_loss =
        boundary_loss || loss.reason.find("boundary layers (0, 1, 6, 7)") != std::string::npos;
  }
  EXPECT_TRUE(boundary_loss);
}

// An engine that stores none of the plan's formats: one error naming what it lacks and the search
// that gives a plan it runs.
TEST(EngineExports, AnEngineThatCanExpressNoLayerIsRefusedWithTheSearchToRun) {
  const Plan ints = plan_with({"KV4", "K8V4"});
  try {
    (void)export_plan(ints, EngineId::kVllm);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("does not store int4, int8"), std::string::npos) << what;
    EXPECT_NE(what.find("kvplan search --engine vllm"), std::string::npos) << what;
  }
  EXPECT_THROW((void)export_plan(plan_with({"fp8_e4m3/fp8_e4m3"}), EngineId::kHf), Error);
  EXPECT_THROW((void)export_plan(ints, EngineId::kVllmTurboquant), Error);
  // One side it stores is enough to map the rest, every loss listed.
  const PlanExport mapped = export_plan(plan_with({"KV4", "bf16/bf16"}), EngineId::kTrtllm);
  EXPECT_FALSE(mapped.exact());
  EXPECT_EQ(export_plan(ints, EngineId::kHf).text, export_kvtuner_yaml(ints).text);
}

}  // namespace
}  // namespace kvplan
