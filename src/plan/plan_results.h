// What a plan records about how it was found and what it measured (plan.json's `quality`,
// `pareto_front`, `baselines` and `provenance`; docs/plan-schema.md): typed here, written by
// results_to_json and read back by results_from_json, the one place that knows their JSON shape.
// Readers refuse a mistyped field naming the file and its JSON path; absent optional fields stay
// absent, so plans written before a field existed still load.
//
//   PlanResults r = results_from_json(plan_json, "plan.json");
//   if (r.quality.best_uniform) r.quality.best_uniform->ratio;
//   results_to_json(r, plan_json);   // sets the four sections
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/build_record.h"

namespace kvplan {

// A text a plan was chosen or measured on.
struct MeasuredText {
  std::string source;  // file name
  std::string hash;
  int64_t tokens = 0, scored = 0, samples = 0;
};

// plan - baseline mean KL on the report text with its paired bootstrap 95 % interval.
struct KlDifference {
  double plan_minus_baseline = 0, low = 0, high = 0;
  std::string verdict;  // "plan lower", "plan higher", "no difference"
};

struct BestUniform {
  std::string kv;
  double mean_kl = 0;
  KlDifference difference;  // verdict unused
  double ratio = 0;         // plan / best mean KL
};

// The plan and the best uniform pair at one context (the report text as one stream).
struct LongContextRow {
  int ctx = 0, chunks = 0;
  int64_t scored = 0;
  double plan_mean_kl = 0, baseline_mean_kl = 0;
};

struct LongContextQuality {
  std::string protocol;
  int64_t stream_tokens = 0;
  std::string baseline;  // the uniform pair the rows compare with
  std::vector<LongContextRow> rows{};
};

// Another plan measured on the report text beside this one (`search --compare-plan`): e.g. the
// per-layer plan of the same budget next to a per-KV-head one.
struct ComparedPlan {
  std::string source;       // the plan file's name
  std::string granularity;  // "per layer" or "per KV head"
  double bytes_per_token = 0;
  double mean_kl = 0, top1_agreement = 0;
  KlDifference difference;  // this plan - the compared one, paired bootstrap
};

// How much allocation alone can gain, by the profile's additive surrogate: the least error any
// plan of the searched space predicts within the budget (the exact front's end) against the best
// predicted uniform pair there. A ratio near 1 says the candidates leave mixing little to win, so
// what the plan gains on the report text is bounded by it (up to the surrogate's error).
struct AllocationHeadroom {
  double best_plan_predicted = 0;
  std::string best_uniform;  // the uniform pair predicted best within the budget
  double best_uniform_predicted = 0;
  double ratio = 0;  // best_plan_predicted / best_uniform_predicted
};

struct PlanQuality {
  std::string metric;
  std::optional<double> mean_kl{}, top1_agreement{}, ppl{}, ppl_exact_kv{}, predicted_error{};
  bool validated = false;
  std::string chosen_as;                    // "searched plan" or "uniform X"
  std::optional<MeasuredText> data{};       // the report text
  std::optional<MeasuredText> selection{};  // the selection text
  std::optional<double> selection_mean_kl{};
  // Spearman over the validated plans; written with `selection` (null when undefined).
  std::optional<double> rank_correlation{};
  // Spearman of the final surrogate's predictions against the report text's mean KL, over the
  // plan and every uniform baseline measured there (absent in plans written before it was).
  std::optional<double> rank_correlation_on_report{};
  std::optional<BestUniform> best_uniform{};
  std::optional<AllocationHeadroom> headroom{};  // absent in plans written before it was
  std::optional<LongContextQuality> long_context{};
  std::vector<ComparedPlan> compared_plans{};
};

// A uniform K/V configuration next to the plan: measured on the report text when `mean_kl` is set.
struct UniformBaseline {
  std::string kv{}, key{}, value{};
  double equivalent_bits = 0, effective_bits = 0, bytes_per_token = 0;
  bool within_budget = false;
  std::optional<double> predicted_error{};
  std::optional<double> mean_kl{}, top1_agreement{}, ppl{};
  std::optional<KlDifference> kl_difference{};
  // Why the report text measured it (search/report_baselines.h: "top 4 predicted", "best of
  // ggml/turboquant", "within 3 % of the budget", "engine or KVTuner default", "validated on
  // selection"); empty in plans written before the reasons were recorded.
  std::vector<std::string> measured_because{};
};

// A point of the search's fronts: "exact" (additive surrogate, DP) or "nsga2" (corrected).
struct ParetoPoint {
  std::string source;
  double memory = 0, predicted_error = 0;  // memory in the provenance's memory_measure
  std::optional<double> equivalent_bits{}, bytes_per_token{};
  std::optional<double> mean_kl{};    // measured on the selection text, where validated
  std::vector<std::string> layers{};  // its pairs, where validated
};

struct ValidatedPlan {
  int round = 0;
  std::string plan;  // "searched" or "uniform X"
  double memory = 0, predicted_error = 0, mean_kl = 0;
};

// One round of the validation loop (search/validation_loop.h).
struct ValidationRoundRecord {
  int round = 0;
  int measured = 0;                                   // real evaluations in the round
  double best_mean_kl = 0;                            // the lowest measured after it (selection)
  std::optional<double> held_out_rank_correlation{};  // of the refit after it; null: undefined
  std::string next;                                   // why the loop went on or stopped
};

struct ProfileRecord {
  std::string hash, calibration_hash;
  int64_t calibration_tokens = 0;
  std::optional<bool> chunk_attends_quantized{};  // absent in plans written before it was
};

// A group of layers the search set together: whole pairs, or only their keys or values ("keys" /
// "values": ik_llama.cpp's first/last-N types, which K and V take apart).
struct SearchGroupRecord {
  std::vector<int> layers{};
  std::string side{};  // empty: the pair
};

struct SearchProvenance {
  std::string algorithm, sensitivity, memory_measure, budget, clustering;
  // The serving engine the search was restricted to (--engine; empty: kvplan's own, every format
  // on any layer) and the layer structure it took for it.
  std::string engine, engine_structure;
  // "per KV head" when the search's entries were KV heads (`--per-head`: surrogate weights and
  // groups are per head, the plan is v3); empty: per layer.
  std::string granularity;
  std::optional<double> budget_value{};  // null: no budget
  std::optional<uint64_t> seed{}, population{}, generations{}, islands{};
  std::optional<uint64_t> surrogate_evaluations{}, real_evaluations{}, selection_evaluations{},
      report_evaluations{}, validation_rounds{}, exact_front_points{}, exact_front_states{},
      nsga2_front_points{};
  std::optional<double> unseeded_nsga2_coverage_of_exact_front{};
  std::optional<double> dbscan_eps{};
  std::optional<int64_t> dbscan_min_samples{};
  std::vector<SearchGroupRecord> groups{};
  std::vector<ValidatedPlan> validations{};
  std::vector<ValidationRoundRecord> rounds{};  // empty in plans written before it was
  std::vector<UniformBaseline> uniform_not_measured_on_report{};
  std::vector<double> surrogate_weights{};  // per layer; empty when not recorded
  std::optional<double> surrogate_interaction{};
  std::optional<ProfileRecord> profile{};
  // The binary that searched and measured, and its OpenMP threads (the results do not depend on
  // the thread count; they may on the build, core/build_record.h).
  std::optional<BuildRecord> build{};
  std::optional<int> threads{};
};

struct PlanResults {
  PlanQuality quality;
  std::vector<ParetoPoint> pareto_front{};
  std::vector<UniformBaseline> baselines{};
  SearchProvenance provenance;
};

// The error the search's surrogate predicts for per-layer sensitivities e_l (one per weight):
// sum_l w_l e_l + gamma (sum_l e_l)^2. src/search/surrogate.h fits (w, gamma); the plan records
// them (provenance.surrogate_weights, surrogate_interaction), so a reader can predict with them
// too.
double surrogate_prediction(const std::vector<double>& weights, double interaction,
                            const std::vector<double>& layer_errors);

// Reads the four sections of plan JSON `j` (each may be absent); Error(kInvalidArgument) naming
// `source` and the field for a mistyped one.
PlanResults results_from_json(const nlohmann::json& j, const std::string& source);
// Writes the four sections into plan JSON object `j`.
void results_to_json(const PlanResults& r, nlohmann::json& j);
// The provenance section alone, as results_to_json writes it (the report lists its settings).
nlohmann::json provenance_to_json(const SearchProvenance& p);

}  // namespace kvplan
