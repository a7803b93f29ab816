#include "engines/exporters.h"
#include "engines/plan_fixtures.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

using test::plan_with;

// The YAML without its comment lines.
std::string yaml_body(const std::string& text) {
  std::string body;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at + 1);
    if (!line.starts_with('#')) body += line;
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return body;
}

// The losses of `e` for one layer.
std::vector<ExportLoss> losses_of(const PlanExport& e, int layer) {
  std::vector<ExportLoss> out;
  for (const ExportLoss& l : e.losses)
    if (l.layer == layer) out.push_back(l);
  return out;
}

// KVTuner quantizes every layer and none of its backends takes 16 bits: a bf16 side is written
// as 8 bits and listed, never called exact.
TEST(Exporters, KvTunerWritesSixteenBitSidesAsEightAndListsThem) {
  const PlanExport e = export_kvtuner_yaml(plan_with({"K8V4", "KV2", "KV16", "K16V4"}));
  EXPECT_EQ(yaml_body(e.text),
            "0:\n  nbits_key: 8\n  nbits_value: 4\n1:\n  nbits_key: 2\n  nbits_value: 2\n"
            "2:\n  nbits_key: 8\n  nbits_value: 8\n3:\n  nbits_key: 8\n  nbits_value: 4\n");
  EXPECT_FALSE(e.exact());
  EXPECT_TRUE(losses_of(e, 0).empty());
  EXPECT_TRUE(losses_of(e, 1).empty());
  const std::vector<ExportLoss> l2 = losses_of(e, 2), l3 = losses_of(e, 3);
  ASSERT_EQ(l2.size(), 2u);
  EXPECT_EQ(l2[0].field, "key");
  EXPECT_EQ(l2[0].planned, "bf16");
  EXPECT_EQ(l2[0].exported, "8 bits");
  EXPECT_EQ(l2[1].field, "value");
  ASSERT_EQ(l3.size(), 1u);  // K16V4: only the key changes
  EXPECT_EQ(l3[0].field, "key");
  // The int layers keep their bits but not kvplan's rounding: one plan-wide loss says so.
  const std::vector<ExportLoss> wide = losses_of(e, -1);
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_EQ(wide[0].field, "quantizer");
  // Formats KVTuner lacks take the int bits nearest them, each listed.
  const PlanExport mapped = export_kvtuner_yaml(plan_with({"K8V4", "q4_0/fp8_e4m3"}));
  EXPECT_NE(mapped.text.find("1:\n  nbits_key: 4\n  nbits_value: 8\n"), std::string::npos)
      << mapped.text;
  const std::vector<ExportLoss> l1 = losses_of(mapped, 1);
  ASSERT_EQ(l1.size(), 2u);
  EXPECT_EQ(l1[0].planned, "q4_0");
  EXPECT_EQ(l1[0].exported, "4 bits");
  EXPECT_EQ(l1[1].exported, "8 bits");
}

// The settings KVTuner takes as constructor arguments travel in the header comment.
TEST(Exporters, KvTunerHeaderCarriesModeGroupResidualAsymAndForceQuant) {
  const PlanExport per_token = export_kvtuner_yaml(plan_with({"KV4", "KV4"}));
  EXPECT_NE(per_token.text.find("asym=True,\n#       axis_key=0, axis_value=0, q_group_size=32, "
                                "residual_length=0, force_quant=True))"),
            std::string::npos)
      << per_token.text;
  Plan kivi = plan_with({"KV4", "KV4"});
  kivi.quantization.mode = QuantMode::kKivi;
  kivi.quantization.residual_length = 64;
  EXPECT_NE(export_kvtuner_yaml(kivi).text.find(
                "axis_key=1, axis_value=0, q_group_size=32, residual_length=64, force_quant=True"),
            std::string::npos);
  // A group as wide as the row is KVTuner's -1 (whole row).
  Plan wide = plan_with({"KV4"}, 32);
  wide.quantization.group_size = 128;
  const PlanExport w = export_kvtuner_yaml(wide);
  EXPECT_NE(w.text.find("q_group_size=-1"), std::string::npos) << w.text;
  EXPECT_EQ(losses_of(w, -1).size(), 1u);  // the quantizer only
}

// KIVI key formats in a per-token plan: KVTuner's axis_key is one setting, taken from most of the
// quantized keys; the layers on the other axis are listed as losses.
TEST(Exporters, KvTunerAxisFollowsMostKiviKeyLayers) {
  Plan plan = plan_with({"int4_kivi/int4", "int2_kivi/int4", "KV4"});
  plan.quantization.residual_length = 64;
  const PlanExport e = export_kvtuner_yaml(plan);
  EXPECT_NE(e.text.find("axis_key=1, axis_value=0, q_group_size=32, residual_length=64"),
            std::string::npos)
      << e.text;
  EXPECT_NE(e.text.find("0:\n  nbits_key: 4\n  nbits_value: 4\n1:\n  nbits_key: 2\n"),
            std::string::npos)
      << e.text;
  EXPECT_TRUE(losses_of(e, 0).empty());
  const std::vector<ExportLoss> l2 = losses_of(e, 2);
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_EQ(l2[0], (ExportLoss{2, "key axis", "int4 per token", "4 bits per channel (KIVI)",
                               "KVTuner's axis_key is one setting for every layer"}));
  // Most keys per token: axis_key=0, the KIVI layer is the loss.
  const PlanExport t = export_kvtuner_yaml(plan_with({"int4_kivi/int4", "KV4", "KV4"}));
  EXPECT_NE(t.text.find("axis_key=0"), std::string::npos) << t.text;
  ASSERT_EQ(losses_of(t, 0).size(), 1u);
  EXPECT_EQ(losses_of(t, 0)[0].field, "key axis");
}

TEST(Exporters, KvTunerListsGroupsItCannotTakePerLayer) {
  // int4_g64 keeps its own group of 64; KVTuner has one q_group_size (32) for every layer.
  const PlanExport e = export_kvtuner_yaml(plan_with({"int4_g64/int4", "KV4"}, 128));
  const std::vector<ExportLoss> l0 = losses_of(e, 0);
  ASSERT_EQ(l0.size(), 1u);
  EXPECT_EQ(l0[0],
            (ExportLoss{0, "key group_size", "int4_g64 in groups of 64", "4 bits in groups of 32",
                        "KVTuner's q_group_size is one setting for every layer"}));
  EXPECT_TRUE(losses_of(e, 1).empty());
  // KIVI with groups of 32 tokens on rows of 16 values: the plan clamps value groups to 16,
  // KVTuner would group 32 values across rows.
  Plan kivi = plan_with({"KV4"}, 16);
  kivi.quantization.mode = QuantMode::kKivi;
  const PlanExport k = export_kvtuner_yaml(kivi);
  bool value_group = false;
  for (const ExportLoss& l : losses_of(k, -1))
    value_group =
        value_group || (l.field == "value group_size" && l.planned == "16" && l.exported == "32");
  EXPECT_TRUE(value_group);
}

TEST(Exporters, LlamaCppPicksTheBestMeasuredPairThatFits) {
  Plan p = plan_with({"K8V4", "K8V4", "KV8", "K4V2"});  // mixed int plan
  // Measured baselines: q8_0/q4_0 fits within the plan's bytes and beats q4_0/q4_0.
  for (const auto& [kv, kl] :
       {std::pair{"q8_0/q8_0", 0.001}, std::pair{"q8_0/q4_0", 0.010}, std::pair{"q4_0/q4_0", 0.050},
        std::pair{"KV4", 0.002}}) {  // KV4: not a llama.cpp type
    p.results.baselines.push_back({.kv = kv, .mean_kl = kl});
  }
  const PlanExport e = export_llamacpp(p);
  // Plan: per head (80+80)... q8_0/q8_0 (136+... at head_dim 64: 68+68) exceeds it, q8_0/q4_0 does
  // not. Unrotated at head_dim 64: llama.cpp must be told not to rotate.
  EXPECT_EQ(e.text, "export LLAMA_ATTN_ROT_DISABLE=1\n-ctk q8_0 -ctv q4_0 -fa on");
  EXPECT_FALSE(e.exact());
  // Every layer's K and V differ from the one pair llama.cpp applies.
  EXPECT_EQ(e.losses.size(), 8u);
  EXPECT_EQ(losses_of(e, 3),
            (std::vector<ExportLoss>{
                {3, "key", "int4", "q8_0", "llama.cpp applies one -ctk type to every layer"},
                {3, "value", "int2", "q4_0", "llama.cpp applies one -ctv type to every layer"}}));
  // head_dim 8: no llama.cpp type can hold the rows.
  EXPECT_THROW((void)export_llamacpp(plan_with({"KV4", "KV4"}, 8)), Error);
}

// llama.cpp rotates quantized K and V by itself at head_dim % 64 == 0 (PR #21038): a measured
// rotated pair is given as its plain cache types, with nothing else; an unrotated pair needs
// LLAMA_ATTN_ROT_DISABLE=1; where nothing is rotated, neither is needed.
TEST(Exporters, LlamaCppGivesRotatedPairsAsItsDefaultAndUnrotatedOnesTheEnvironment) {
  Plan p = plan_with({"K8V4", "K8V4", "KV8", "K4V2"});
  for (const auto& [kv, kl] : {std::pair{"q8_0/q4_0", 0.010}, std::pair{"q8_0_had/q4_0_had", 0.004},
                               std::pair{"q8_0_had/q4_0", 0.001}}) {  // the last: not runnable
    p.results.baselines.push_back({.kv = kv, .mean_kl = kl});
  }
  const PlanExport rotated = export_llamacpp(p);
  EXPECT_EQ(rotated.text, "-ctk q8_0 -ctv q4_0 -fa on");
  EXPECT_EQ(rotated.runs.front(), KvPair::parse("q8_0_had/q4_0_had"));
  bool says_rotated = false;
  for (const std::string& n : rotated.notes)
    says_rotated = says_rotated || n.find("PR #21038") != std::string::npos;
  EXPECT_TRUE(says_rotated);
  // head_dim 128: V is rotated in spans of 64, so the whole-row q4_0_had is not what llama.cpp
  // stores there: the unrotated pair, with the environment variable.
  Plan wide = p;
  wide.model.geometry = KvGeometry::uniform("m", 4, 1, 128);
  const PlanExport unrotated = export_llamacpp(wide);
  EXPECT_EQ(unrotated.text, "export LLAMA_ATTN_ROT_DISABLE=1\n-ctk q8_0 -ctv q4_0 -fa on");
  EXPECT_EQ(unrotated.runs.front(), KvPair::parse("q8_0/q4_0"));
  // Measured as llama.cpp stores it by default there (V in spans of 64): no environment needed.
  wide.results.baselines.push_back({.kv = "q8_0_had/q4_0_had64", .mean_kl = 0.005});
  const PlanExport spans = export_llamacpp(wide);
  EXPECT_EQ(spans.text, "-ctk q8_0 -ctv q4_0 -fa on");
  EXPECT_EQ(spans.runs.front(), KvPair::parse("q8_0_had/q4_0_had64"));
  // head_dim 32: llama.cpp rotates nothing.
  Plan narrow = plan_with({"K8V4", "K8V4"}, 32);
  narrow.results.baselines = {{.kv = "q8_0/q4_0", .mean_kl = 0.01}};
  EXPECT_EQ(export_llamacpp(narrow).text, "-ctk q8_0 -ctv q4_0 -fa on");
  // Unmeasured at head_dim 64: the largest pair that fits, as llama.cpp stores it by default
  // (every quantized type rotated: q4_1 too).
  const PlanExport unmeasured = export_llamacpp(plan_with({"KV8", "KV8"}));
  EXPECT_EQ(unmeasured.text, "-ctk q8_0 -ctv q8_0 -fa on");
  EXPECT_EQ(unmeasured.runs.front(), KvPair::parse("q8_0_had/q8_0_had"));
  const PlanExport mixed = export_llamacpp(plan_with({"K8V4", "K8V4", "KV8", "K4V2"}));
  EXPECT_EQ(mixed.text, "-ctk q8_0 -ctv q4_1 -fa on");
  EXPECT_EQ(mixed.runs.front(), KvPair::parse("q8_0_had/q4_1_had"));
  // At head_dim 256 the unmeasured default stores V in spans of 64.
  const PlanExport wide_unmeasured = export_llamacpp(plan_with({"KV8", "KV8"}, 256));
  EXPECT_EQ(wide_unmeasured.text, "-ctk q8_0 -ctv q8_0 -fa on");
  EXPECT_EQ(wide_unmeasured.runs.front(), KvPair::parse("q8_0_had/q8_0_had64"));
}

TEST(Exporters, VllmExpressesFp8AndSkippedLayersOnly) {
  const PlanExport fp8 =
      export_vllm(plan_with({"bf16/bf16", "fp8_e4m3/fp8_e4m3", "fp8_e4m3/fp8_e4m3"}));
  EXPECT_EQ(fp8.text, "--kv-cache-dtype fp8_e4m3 --kv-cache-dtype-skip-layers 0");
  EXPECT_TRUE(fp8.exact());
  const PlanExport ints = export_vllm(plan_with({"K8V4", "KV16"}));
  EXPECT_FALSE(ints.exact());
  ASSERT_FALSE(ints.notes.empty());
  EXPECT_NE(ints.notes.front().find("cannot be expressed"), std::string::npos);
  EXPECT_EQ(losses_of(ints, 0),
            (std::vector<ExportLoss>{
                {0, "key", "int8", "fp8_e4m3", "int8 is not a vLLM KV cache dtype"},
                {0, "value", "int4", "fp8_e4m3", "int4 is not a vLLM KV cache dtype"}}));
  // Bytes by hand, 2 KV heads of 64: the plan's int8 row is 64 + 2 groups x 4 = 72 B, int4 32 +
  // 8 = 40 B, bf16 128 B: (72 + 40) x 2 + 256 x 2 = 736; vLLM's fp8 row is 64 B: 256 + 512 = 768.
  EXPECT_EQ(ints.notes[1],
            "vLLM stores 768 bytes per token with this configuration, the plan 736 "
            "(+4.3%)");
  const PlanExport all16 = export_vllm(plan_with({"KV16"}));
  EXPECT_EQ(all16.text, "--kv-cache-dtype auto");
  EXPECT_TRUE(all16.exact());
  // Calibrated per-head fp8 scales cannot travel in vLLM's flags: listed per layer and side.
  Plan scaled = plan_with({"fp8_e4m3/fp8_e4m3"});
  scaled.layers[0].fp8_scales.key = {0.02f, 0.03f};
  const PlanExport s = export_vllm(scaled);
  EXPECT_EQ(s.text, "--kv-cache-dtype fp8_e4m3");
  ASSERT_EQ(s.losses.size(), 1u);
  EXPECT_EQ(s.losses[0].field, "key fp8_e4m3 scales");
  EXPECT_EQ(s.losses[0].planned, "2 calibrated per-KV-head scales");
}

// The export took whichever fp8 variant it saw last and still called itself exact.
TEST(Exporters, VllmMixedFp8VariantsTakeTheMajorityAndListTheLayersThatChange) {
  const PlanExport e =
      export_vllm(plan_with({"fp8_e5m2/fp8_e5m2", "fp8_e5m2/fp8_e5m2", "fp8_e4m3/fp8_e4m3"}));
  EXPECT_EQ(e.text, "--kv-cache-dtype fp8_e5m2");
  EXPECT_FALSE(e.exact());
  const std::string why =
      "vLLM takes one dtype for every quantized layer; the plan's quantized layers hold 2 "
      "fp8_e4m3, 4 fp8_e5m2 K/V sides";
  EXPECT_EQ(e.losses, (std::vector<ExportLoss>{{2, "key", "fp8_e4m3", "fp8_e5m2", why},
                                               {2, "value", "fp8_e4m3", "fp8_e5m2", why}}));
  // The layer order does not decide.
  EXPECT_EQ(
      export_vllm(plan_with({"fp8_e4m3/fp8_e4m3", "fp8_e5m2/fp8_e5m2", "fp8_e5m2/fp8_e5m2"})).text,
      "--kv-cache-dtype fp8_e5m2");
  // A tie goes to e4m3, and K and V of one layer count separately.
  const PlanExport tie = export_vllm(plan_with({"fp8_e4m3/fp8_e5m2"}));
  EXPECT_EQ(tie.text, "--kv-cache-dtype fp8_e4m3");
  ASSERT_EQ(tie.losses.size(), 1u);
  EXPECT_EQ(tie.losses[0].field, "value");
  EXPECT_EQ(tie.losses[0].planned, "fp8_e5m2");
}

// vLLM takes one dtype per layer: a layer with one 16-bit side stays whole at the model's dtype,
// and the skip list is space separated (vLLM: --kv-cache-dtype-skip-layers 0 1 23).
TEST(Exporters, VllmLayerWithASixteenBitSideIsSkippedWhole) {
  const PlanExport e =
      export_vllm(plan_with({"bf16/fp8_e4m3", "fp8_e4m3/fp8_e4m3", "bf16/bf16", "f32/f32"}));
  EXPECT_EQ(e.text, "--kv-cache-dtype fp8_e4m3 --kv-cache-dtype-skip-layers 0 2 3");
  const std::vector<ExportLoss> l0 = losses_of(e, 0), l3 = losses_of(e, 3);
  ASSERT_EQ(l0.size(), 1u);
  EXPECT_EQ(l0[0].field, "value");
  EXPECT_EQ(l0[0].planned, "fp8_e4m3");
  EXPECT_EQ(l0[0].exported, "auto (the model's dtype)");
  ASSERT_EQ(l3.size(), 2u);  // f32 is not the model's 16-bit dtype
  EXPECT_EQ(l3[0].planned, "f32");
  EXPECT_TRUE(losses_of(e, 1).empty());
  EXPECT_TRUE(losses_of(e, 2).empty());
}

TEST(Exporters, DescribeLossesGroupsLayersIntoRanges) {
  const std::vector<ExportLoss> losses = {
      {0, "key", "a", "b", "r"},   {1, "key", "a", "b", "r"},
      {5, "key", "a", "b", "r"},   {2, "key", "a", "b", "r"},
      {2, "value", "c", "d", "s"}, {-1, "mode", "kivi", "per-token", "t"}};
  EXPECT_EQ(describe_losses(losses),
            (std::vector<std::string>{"layers 0-2, 5 key: a -> b (r)", "layer 2 value: c -> d (s)",
                                      "every layer mode: kivi -> per-token (t)"}));
}

// A per-KV-head layer reaches an engine of one format per layer as its widest head format on
// every head, each differing side listed.
TEST(Exporters, PerHeadLayersExportTheirWidestHeadFormatsAndListTheLoss) {
  Plan p = plan_with({"q8_0/q8_0", "q8_0/q4_0"});
  p.layers[1].heads = {KvPair::parse("q4_0/q4_0"), KvPair::parse("q8_0/q4_0")};
  p.layers[1].pair =
      widest_pair_of_heads(p.layers[1].heads, p.model.geometry.layers[1], p.quantization, 1);
  ASSERT_EQ(p.layers[1].pair, KvPair::parse("q8_0/q4_0"));
  const PlanExport e = export_plan(p, EngineId::kIkLlamaCpp);
  ASSERT_FALSE(e.losses.empty());
  EXPECT_EQ(e.losses.front().layer, 1);
  EXPECT_EQ(e.losses.front().field, "key");
  EXPECT_EQ(e.losses.front().planned, "per KV head q4_0,q8_0");
  EXPECT_EQ(e.losses.front().exported, "q8_0");
  // Values agree across the heads: no loss for them.
  for (const ExportLoss& loss : e.losses) {
    EXPECT_FALSE(loss.layer == 1 && loss.field == "value") << loss.planned;
  }
}

}  // namespace
}  // namespace kvplan
