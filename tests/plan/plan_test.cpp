#include "plan/plan.h"

#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_text.h"
#include "plan/plan_fingerprint.h"

namespace kvplan {
namespace {

namespace fs = std::filesystem;

Plan small_plan() {
  Plan p;
  p.tool_version = "test";
  p.created = "2026-01-01T00:00:00Z";
  p.model.name = "tiny";
  p.model.architecture = "llama";
  p.model.fingerprint = "0123456789abcdef";
  p.model.n_attention_heads = 8;
  p.model.geometry = KvGeometry::uniform("tiny", 3, 2, 64);
  for (int l = 0; l < 3; ++l)
    p.layers.push_back({l, l % 2, KvPair::parse(l == 1 ? "K8V4" : "q8_0/q4_0")});
  return p;
}

std::string expect_error(const nlohmann::json& j) {
  try {
    (void)plan_from_json(j, "plan.json");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "plan was accepted: " << j.dump();
  return "";
}

TEST(Plan, RoundTripsThroughJsonAndDisk) {
  const Plan p = small_plan();
  const fs::path path = fs::temp_directory_path() / "kvplan_plan_test.json";
  write_plan(path, p);
  const Plan back = read_plan(path);
  EXPECT_EQ(back.layers.size(), 3u);
  EXPECT_EQ(back.layers[1].pair.name(), "K8V4");
  EXPECT_EQ(back.layers[0].pair.name(), "q8_0/q4_0");
  EXPECT_EQ(back.layers[1].group, 1);
  EXPECT_EQ(plan_to_json(back), plan_to_json(p));
  fs::remove(path);
}

TEST(Plan, SummaryFollowsKvTunerDefinitions) {
  const PlanSummary s = summarize_plan(small_plan());
  // equivalent bits: mean over layers of (k+v)/2 = (6 + 6 + 6) / 3
  EXPECT_DOUBLE_EQ(s.equivalent_bits, 6.0);
  // bytes per token at head_dim 64: 2 heads x [(68+36) + (72+40) + (68+36)]
  EXPECT_DOUBLE_EQ(s.bytes_per_token, 2.0 * ((68 + 36) + (72 + 40) + (68 + 36)));
  EXPECT_DOUBLE_EQ(s.bf16_bytes_per_token, 3.0 * 2 * (128 + 128));
  EXPECT_DOUBLE_EQ(s.effective_bits, 8.0 * s.bytes_per_token / (3 * 2 * 64 * 2));
  EXPECT_DOUBLE_EQ(s.compression_ratio, s.bf16_bytes_per_token / s.bytes_per_token);
}

TEST(Plan, MalformedPlansNameTheField) {
  const nlohmann::json good = plan_to_json(small_plan());
  EXPECT_NO_THROW((void)plan_from_json(good, "plan.json"));

  nlohmann::json j = good;
  j["schema"] = "kvplan.plan/v9";
  EXPECT_NE(expect_error(j).find("schema"), std::string::npos);
  j = good;
  j["model"].erase("num_layers");
  EXPECT_NE(expect_error(j).find("num_layers"), std::string::npos);
  j = good;
  j["layers"].erase(j["layers"].begin());
  EXPECT_NE(expect_error(j).find("layers"), std::string::npos);
  j = good;
  j["layers"][2]["key"] = "q3_k";
  EXPECT_NE(expect_error(j).find("layers[2]"), std::string::npos);
  j = good;
  j["layers"][1]["value_bytes_per_token"] = 1.0;
  EXPECT_NE(expect_error(j).find("value_bytes_per_token"), std::string::npos);
  j = good;
  j["quantization"]["mode"] = "sideways";
  EXPECT_NE(expect_error(j).find("quantization"), std::string::npos);
  j = good;
  j["layers"][0]["index"] = 7;
  EXPECT_NE(expect_error(j).find("index"), std::string::npos);
  j = good;
  j["model"]["head_dim"] = 8;  // q8_0/q4_0 cannot pack 8-value rows
  EXPECT_NE(expect_error(j).find("layer 0"), std::string::npos) << expect_error(j);
  EXPECT_THROW((void)plan_from_json(nlohmann::json::array(), "plan.json"), Error);
}

// A per-KV-head plan: layer 1's two heads take different pairs.
Plan per_head_plan() {
  Plan p = small_plan();
  const KvPair q8 = KvPair::parse("q8_0/q8_0"), q4 = KvPair::parse("q4_0/q4_0");
  p.layers[1].heads = {q8, q4};
  p.layers[1].pair =
      widest_pair_of_heads(p.layers[1].heads, p.model.geometry.layers[1], p.quantization, 1);
  return p;
}

TEST(Plan, PerHeadPlansRoundTripAsSchemaV3AndCountEachHeadsBytes) {
  const Plan p = per_head_plan();
  EXPECT_TRUE(p.per_head());
  EXPECT_EQ(p.layers[1].pair.name(), "q8_0/q8_0");  // per side the widest head format
  const nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["schema"], kPlanSchemaV3);
  EXPECT_FALSE(j["layers"][1].contains("key"));
  ASSERT_EQ(j["layers"][1]["heads"].size(), 2u);
  EXPECT_EQ(j["layers"][1]["heads"][1]["value"], "q4_0");
  // A head's row: q8_0 34 bytes per 32 values, q4_0 18; two rows of 64 per head and side.
  EXPECT_DOUBLE_EQ(j["layers"][1]["key_bytes_per_token"].get<double>(), 68 + 36);
  const Plan back = plan_from_json(j, "plan.json");
  EXPECT_EQ(back.layers[1].heads, p.layers[1].heads);
  EXPECT_EQ(back.layers[1].pair, p.layers[1].pair);
  EXPECT_EQ(plan_to_json(back), j);
  EXPECT_DOUBLE_EQ(summarize_plan(back).bytes_per_token,
                   2.0 * (68 + 36) + 2 * (68 + 36) + (68 + 36) * 2);
  EXPECT_DOUBLE_EQ(summarize_plan(back).equivalent_bits, (6.0 + 6.0 + 6.0) / 3);
  // The configuration per KV head, layer-major; consumers of one pair per layer are refused.
  const std::vector<KvPair> config = back.kv_config();
  ASSERT_EQ(config.size(), 6u);
  EXPECT_EQ(config[2], KvPair::parse("q8_0/q8_0"));
  EXPECT_EQ(config[3], KvPair::parse("q4_0/q4_0"));
  EXPECT_EQ(config[5], KvPair::parse("q8_0/q4_0"));
  try {
    (void)back.pairs("the runtime");
    ADD_FAILURE() << "pairs() of a per-head plan";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("the runtime"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("layer 1"), std::string::npos);
  }
  // A per-layer plan stays v2 and its configuration is its pairs.
  EXPECT_EQ(plan_to_json(small_plan())["schema"], kPlanSchema);
  EXPECT_EQ(small_plan().kv_config(), small_plan().pairs());
}

TEST(Plan, MalformedPerHeadLayersNameTheField) {
  const nlohmann::json good = plan_to_json(per_head_plan());
  EXPECT_NO_THROW((void)plan_from_json(good, "plan.json"));
  nlohmann::json j = good;
  j["schema"] = kPlanSchema;  // heads need v3
  EXPECT_NE(expect_error(j).find("heads"), std::string::npos);
  j = good;
  j["layers"][1]["heads"].erase(1);
  EXPECT_NE(expect_error(j).find("one per KV head"), std::string::npos) << expect_error(j);
  j = good;
  j["layers"][1]["heads"][1] = j["layers"][1]["heads"][0];
  EXPECT_NE(expect_error(j).find("same pair"), std::string::npos) << expect_error(j);
  j = good;
  j["layers"][1]["key"] = "q8_0";
  EXPECT_NE(expect_error(j).find("not both"), std::string::npos) << expect_error(j);
  j = good;
  j["layers"][1]["heads"][0]["key"] = "q3_k";
  EXPECT_NE(expect_error(j).find("heads[0]"), std::string::npos) << expect_error(j);
  j = good;
  j["layers"][1]["key_bytes_per_token"] = 136.0;
  EXPECT_NE(expect_error(j).find("key_bytes_per_token"), std::string::npos) << expect_error(j);
  j = good;
  j["layers"][1]["key_fp8_scales"] = {1.0};
  EXPECT_NE(expect_error(j).find("key_fp8_scales"), std::string::npos) << expect_error(j);
}

TEST(Plan, UnreadableFilesAreRefused) {
  const fs::path path = fs::temp_directory_path() / "kvplan_bad_plan.json";
  write_file_atomic(path, "{ not json");
  EXPECT_THROW((void)read_plan(path), Error);
  fs::remove(path);
  EXPECT_THROW((void)read_plan(path), Error);
}

TEST(Plan, RefusesAPlanForAnotherModel) {
  const Plan p = small_plan();
  EXPECT_NO_THROW(check_plan_matches(p, KvGeometry::uniform("tiny", 3, 2, 64), "m.gguf"));
  try {
    check_plan_matches(p, KvGeometry::uniform("other", 4, 2, 64), "m.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 layers"), std::string::npos) << e.what();
  }
  try {
    check_plan_matches(p, KvGeometry::uniform("other", 3, 4, 64), "m.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV heads"), std::string::npos) << e.what();
  }
}

TEST(Plan, MiniMaxReferencePlanLoads) {
  const Plan p = read_plan(fs::path(KVPLAN_SOURCE_DIR) / "configs/plans/minimax-m2.5-slot134.json");
  EXPECT_EQ(p.layers.size(), 62u);
  EXPECT_NEAR(summarize_plan(p).compression_ratio, 3.23, 0.005);
}

// Fuzz/review findings: json::value() threw nlohmann's type_error for a mistyped optional field and
// cast a huge double group to int (undefined); numbers past DBL_MAX threw out_of_range.
TEST(Plan, OptionalFieldsAreTypeChecked) {
  const nlohmann::json good = plan_to_json(small_plan());
  nlohmann::json j = good;
  j["layers"][1]["group"] = "first";
  EXPECT_NE(
      expect_error(j).find("plan.json: layers[1]: field 'group': expected an integer in 0..3"),
      std::string::npos)
      << expect_error(j);
  j["layers"][1]["group"] = 1e300;
  EXPECT_NE(expect_error(j).find("field 'group'"), std::string::npos);
  j = good;
  j["quantization"]["scale_dtype"] = 16;
  EXPECT_NE(expect_error(j).find("field 'scale_dtype': expected a string, got 16"),
            std::string::npos);
  try {
    (void)plan_from_text(R"({"schema": 1e400})", "p.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: not valid JSON: number overflow"),
              std::string::npos)
        << e.what();
  }
}

TEST(Plan, Fp8ScalesRoundTripAreCheckedAndPinTheFingerprint) {
  Plan p = small_plan();
  const uint64_t without_fp8 = plan_fingerprint(p);
  p.layers[2].pair = KvPair::parse("fp8_e4m3/q4_0");
  const uint64_t unscaled = plan_fingerprint(p);
  EXPECT_NE(unscaled, without_fp8);
  p.layers[2].fp8_scales.key = {0.0125f, 3.5f};
  const nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["layers"][2]["key_fp8_scales"], nlohmann::json::array({0.0125f, 3.5f}));
  EXPECT_FALSE(j["layers"][2].contains("value_fp8_scales"));
  EXPECT_FALSE(j["layers"][1].contains("key_fp8_scales"));
  const Plan back = plan_from_json(j, "plan.json");
  EXPECT_EQ(back.layers[2].fp8_scales, p.layers[2].fp8_scales);  // bit-exact through JSON text
  EXPECT_EQ(plan_from_text(j.dump(), "plan.json").layers[2].fp8_scales, p.layers[2].fp8_scales);
  // Codes depend on the scales, so stored chunks must not be read under other ones.
  EXPECT_NE(plan_fingerprint(p), unscaled);
  Plan other = p;
  other.layers[2].fp8_scales.key[1] = 3.25f;
  EXPECT_NE(plan_fingerprint(other), plan_fingerprint(p));
  EXPECT_EQ(plan_fingerprint(back), plan_fingerprint(p));

  nlohmann::json bad = j;
  bad["layers"][2]["key_fp8_scales"] = {1.0};
  EXPECT_NE(expect_error(bad).find("plan.json: layers[2]: key_fp8_scales has 1 entries, expected "
                                   "one per KV head (2)"),
            std::string::npos)
      << expect_error(bad);
  bad = j;
  bad["layers"][2]["value_fp8_scales"] = {1.0, 1.0};
  EXPECT_NE(expect_error(bad).find("value format q4_0, which keeps no per-head scale"),
            std::string::npos)
      << expect_error(bad);
  bad = j;
  bad["layers"][2]["key_fp8_scales"] = {1.0, 0.0};
  EXPECT_NE(expect_error(bad).find("key_fp8_scales[1] is 0"), std::string::npos)
      << expect_error(bad);
  bad = j;
  bad["layers"][2]["key_fp8_scales"] = "1";
  EXPECT_NE(expect_error(bad).find("field 'key_fp8_scales': expected an array"), std::string::npos)
      << expect_error(bad);
}

}  // namespace
}  // namespace kvplan

namespace kvplan {
namespace {

// The validation loop's rounds, the report text's rank correlation and the allocation headroom
// are written and read back; a malformed round or headroom names its field.
TEST(Plan, ValidationRoundsRoundTripAndAreChecked) {
  Plan p = small_plan();
  p.results.quality.rank_correlation_on_report = 0.97;
  p.results.quality.headroom = AllocationHeadroom{0.00014, "q8_0_had/q8_0_had", 0.000197, 0.71};
  p.results.provenance.rounds = {{1, 5, 0.0162, 0.7, "next round with the refit"},
                                 {2, 0, 0.0162, std::nullopt,
                                  "stopped: no unmeasured plan is predicted below the best "
                                  "measured error by 1 %"}};
  const nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["quality"]["rank_correlation_on_report"], 0.97);
  EXPECT_TRUE(j["provenance"]["rounds"][1]["held_out_rank_correlation"].is_null());
  const Plan back = plan_from_json(j, "plan.json");
  ASSERT_EQ(back.results.provenance.rounds.size(), 2u);
  EXPECT_EQ(back.results.provenance.rounds[0].held_out_rank_correlation, 0.7);
  EXPECT_FALSE(back.results.provenance.rounds[1].held_out_rank_correlation);
  EXPECT_EQ(back.results.provenance.rounds[1].next, p.results.provenance.rounds[1].next);
  ASSERT_TRUE(back.results.quality.headroom);
  EXPECT_EQ(back.results.quality.headroom->best_uniform, "q8_0_had/q8_0_had");
  EXPECT_EQ(back.results.quality.headroom->ratio, 0.71);
  EXPECT_EQ(plan_to_json(back), j);
  // Plans written before the fields existed have neither, and write neither.
  const nlohmann::json old = plan_to_json(small_plan());
  EXPECT_FALSE(old["provenance"].contains("rounds"));
  EXPECT_FALSE(old["quality"].contains("rank_correlation_on_report"));
  EXPECT_FALSE(old["quality"].contains("allocation_headroom"));
  nlohmann::json bad = j;
  bad["quality"]["allocation_headroom"]["best_uniform"] = 3;
  EXPECT_NE(expect_error(bad).find("field 'quality.allocation_headroom.best_uniform'"),
            std::string::npos)
      << expect_error(bad);
  bad = j;
  bad["provenance"]["rounds"][0]["measured"] = -1;
  EXPECT_NE(expect_error(bad).find(
                "plan.json: field 'provenance.rounds[0].measured': expected an integer in 0.."),
            std::string::npos)
      << expect_error(bad);
}

// Every committed reference plan reads into the typed results and writes back byte for byte:
// the typed sections carry everything `kvplan search` wrote.
TEST(Plan, CommittedPlansRoundTripByteForByte) {
  int plans = 0;
  for (const auto& model : std::filesystem::directory_iterator(
           std::filesystem::path(KVPLAN_SOURCE_DIR) / "data" / "reference")) {
    if (!model.is_directory()) continue;
    // The model's plans, and its per-KV-head plans (per-head/, schema v3).
    std::vector<std::filesystem::directory_entry> files;
    for (const auto& dir : {model.path(), model.path() / "per-head"}) {
      if (!std::filesystem::is_directory(dir)) continue;
      for (const auto& file : std::filesystem::directory_iterator(dir)) files.push_back(file);
    }
    for (const auto& file : files) {
      const std::string name = file.path().filename().string();
      if (!name.starts_with("plan-") || file.path().extension() != ".json") continue;
      const std::string text = read_text_file(file.path());
      // EXPECT_TRUE, not EXPECT_EQ: a failure names the file instead of printing two plans.
      EXPECT_TRUE(json_text(plan_to_json(read_plan(file.path())), 2) + "\n" == text)
          << file.path() << " changes when read and written back";
      ++plans;
    }
  }
  EXPECT_GE(plans, 5);
}

}  // namespace
}  // namespace kvplan
