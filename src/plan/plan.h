// The precision plan (plan.json, schema "kvplan.plan/v2", or "kvplan.plan/v3" when a layer's KV
// heads take different pairs; docs/plan-schema.md, ARCHITECTURE §3.2): which (key, value) format
// each layer (or each KV head of a layer) uses, under which quantization settings, for which
// model — plus what was measured about it. Read and validated here; written atomically by
// write_plan.
//
//   kvplan::Plan plan = kvplan::read_plan("plan.json");
//   kvplan::check_plan_matches(plan, geometry, "model.gguf");   // refuses a plan for another model
//   kvplan::write_plan("out.json", plan);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/fp8_scales.h"
#include "formats/kv_bytes.h"
#include "formats/kv_geometry.h"
#include "formats/kv_pair.h"
#include "formats/quant_settings.h"
#include "plan/plan_results.h"

namespace kvplan {

inline constexpr const char* kPlanSchema = "kvplan.plan/v2";
// Per-KV-head plans: a layer entry may list its heads' pairs ("heads") instead of one pair. A plan
// is written as v3 only when a layer does, so per-layer plans stay readable by v2 readers.
inline constexpr const char* kPlanSchemaV3 = "kvplan.plan/v3";
// v1 plans (KVTuner's int pairs, nominal-bit budgets, one held-out set) still load;
// docs/plan-schema.md says what v2 adds.
inline constexpr const char* kPlanSchemaV1 = "kvplan.plan/v1";

struct PlanLayer {
  int index = 0;
  int group = 0;  // search cluster the layer belonged to
  // The layer's pair; in a per-head layer, the per-layer pair an engine without per-head formats
  // takes instead (per side the widest format of its heads: no head loses precision).
  KvPair pair;
  // Per-KV-head scales of the layer's FP8 sides (formats/fp8_scales.h), calibrated by the profile;
  // empty sides mean 1 (non-FP8 formats, or plans written before scales were stored). In a
  // per-head layer, each head's for its own format (1 on heads whose format keeps none).
  KvHeadScales fp8_scales{};
  // [KV head] the pairs of a layer whose KV heads differ; empty: every head takes `pair`.
  std::vector<KvPair> heads{};

  [[nodiscard]] bool per_head() const { return !heads.empty(); }
};

// Per side, the widest format (most bytes per row) among a layer's KV heads' pairs; ties go to the
// lowest head.
KvPair widest_pair_of_heads(const std::vector<KvPair>& heads, const KvLayerGeometry& layer,
                            const QuantSettings& settings, int layer_index);

struct PlanSummary {
  double equivalent_bits = 0;  // KVTuner: mean over layers of (k_bits + v_bits) / 2
  double effective_bits = 0;   // including scales, zero points, block overhead
  double bytes_per_token = 0;
  double bf16_bytes_per_token = 0;
  double compression_ratio = 0;  // bf16 bytes / plan bytes
};

struct Plan {
  std::string tool_version;
  std::string created;
  KvModel model;
  QuantSettings quantization;
  std::string scale_dtype = "f16";
  std::vector<PlanLayer> layers;
  // What the search measured and how it ran (quality, fronts, baselines, provenance).
  PlanResults results;

  // One pair per layer. Throws Error(kUnimplemented) naming `consumer` for a per-head plan: what
  // reads this cannot hold per-head formats (the runtime's pages, serving, memory by pair).
  [[nodiscard]] std::vector<KvPair> pairs(std::string_view consumer = "this command") const;
  // The plan as a KV configuration: one pair per layer, or for a per-head plan one per KV head
  // (layer-major), as KvCacheOptions::of_config and the validation take it.
  [[nodiscard]] std::vector<KvPair> kv_config() const;
  [[nodiscard]] bool per_head() const;
  // Whether the search chose per KV head (provenance "per KV head"): then the plan is v3 even when
  // its layers' heads all agree, its surrogate weights and groups being per head.
  [[nodiscard]] bool searched_per_head() const;
  // [layer] the layers' FP8 scales, as KvCacheOptions::fp8_scales takes them.
  [[nodiscard]] std::vector<KvHeadScales> fp8_scales() const;
};

// A layer's bytes per token: its pair's, or the sum of its heads' in a per-head layer.
LayerTokenBytes plan_layer_bytes(const Plan& plan, size_t layer);

PlanSummary summarize_plan(const Plan& plan);

// A plan that only assigns pairs (no search behind it): what a uniform configuration such as
// q4_0/q4_0 or bf16 is to the runtime, so that every configuration has pages and an identity.
// `fp8_scales`: one per layer, or empty (scale 1).
Plan plan_of_pairs(const KvModel& model, const std::vector<KvPair>& pairs,
                   const QuantSettings& settings, const std::vector<KvHeadScales>& fp8_scales = {});

// Throws Error(kInvalidArgument / kNotFound) naming the file and the field for anything malformed:
// wrong schema, missing fields, unknown formats, layer count or sizes that disagree.
Plan plan_from_json(const nlohmann::json& j, const std::string& source);
// Parses plan.json text already in memory (`source` names it in errors); read_plan reads a file.
Plan plan_from_text(std::string_view text, const std::string& source);
Plan read_plan(const std::filesystem::path& path);
nlohmann::json plan_to_json(const Plan& plan);
void write_plan(const std::filesystem::path& path, const Plan& plan);

// Refuses (Error kInvalidArgument) a plan whose layer count, KV heads or head_dim differ from the
// model it is applied to, saying what differs.
void check_plan_matches(const Plan& plan, const KvGeometry& model, const std::string& model_source);

}  // namespace kvplan
