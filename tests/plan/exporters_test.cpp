#include "plan/exporters.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

Plan plan_with(const std::vector<const char*>& pairs, int head_dim = 64) {
  Plan p;
  p.tool_version = "test";
  p.model.name = "m";
  p.model.geometry = KvGeometry::uniform("m", static_cast<int>(pairs.size()), 2, head_dim);
  for (size_t l = 0; l < pairs.size(); ++l)
    p.layers.push_back({static_cast<int>(l), 0, KvPair::parse(pairs[l])});
  return p;
}

TEST(Exporters, KvTunerYamlListsEveryLayer) {
  const PlanExport e = export_kvtuner_yaml(plan_with({"K8V4", "KV2", "KV16"}));
  EXPECT_EQ(e.text.substr(e.text.find('\n') + 1),
            "0:\n  nbits_key: 8\n  nbits_value: 4\n1:\n  nbits_key: 2\n  nbits_value: 2\n"
            "2:\n  nbits_key: 16\n  nbits_value: 16\n");
  EXPECT_TRUE(e.exact);
  try {
    (void)export_kvtuner_yaml(plan_with({"K8V4", "q4_0/q4_0"}));
    FAIL();
  } catch (const Error& e2) {
    EXPECT_NE(std::string(e2.what()).find("layer 1"), std::string::npos);
  }
}

TEST(Exporters, LlamaCppPicksTheBestMeasuredPairThatFits) {
  Plan p = plan_with({"K8V4", "K8V4", "KV8", "K4V2"});  // mixed int plan
  // Measured baselines: q8_0/q4_0 fits within the plan's bytes and beats q4_0/q4_0.
  p.baselines = {{{"kv", "q8_0/q8_0"}, {"mean_kl", 0.001}},
                 {{"kv", "q8_0/q4_0"}, {"mean_kl", 0.010}},
                 {{"kv", "q4_0/q4_0"}, {"mean_kl", 0.050}},
                 {{"kv", "KV4"}, {"mean_kl", 0.002}}};  // not a llama.cpp type
  const PlanExport e = export_llamacpp(p);
  // Plan: per head (80+80)... q8_0/q8_0 (136+... at head_dim 64: 68+68) exceeds it, q8_0/q4_0 does
  // not.
  EXPECT_EQ(e.text, "-ctk q8_0 -ctv q4_0 -fa on");
  EXPECT_FALSE(e.exact);
  // head_dim 8: no llama.cpp type can hold the rows.
  EXPECT_THROW((void)export_llamacpp(plan_with({"KV4", "KV4"}, 8)), Error);
}

TEST(Exporters, VllmExpressesFp8AndSkippedLayersOnly) {
  const PlanExport fp8 =
      export_vllm(plan_with({"bf16/bf16", "fp8_e4m3/fp8_e4m3", "fp8_e4m3/fp8_e4m3"}));
  EXPECT_EQ(fp8.text, "--kv-cache-dtype fp8_e4m3 --kv-cache-dtype-skip-layers 0");
  EXPECT_TRUE(fp8.exact);
  const PlanExport ints = export_vllm(plan_with({"K8V4", "KV16"}));
  EXPECT_FALSE(ints.exact);
  ASSERT_FALSE(ints.notes.empty());
  EXPECT_NE(ints.notes.front().find("cannot be expressed"), std::string::npos);
  EXPECT_EQ(export_vllm(plan_with({"KV16"})).text, "--kv-cache-dtype auto");
}

}  // namespace
}  // namespace kvplan
