// What a report shows, gathered from a profile and the plan searched on it: the per-layer
// sensitivity matrices, the plan's layers, its Pareto front and uniform baselines (as the search
// recorded them, each with its error under the refit surrogate), the memory table
// (src/formats/kv_bytes.h), validation and provenance. The HTML and Markdown writers only format
// this.
//
//   kvplan::report::ReportData d = kvplan::report::build_report_data(
//       {read_profile("profile.json"), "profile.json"}, {read_plan("plan.json"), "plan.json"}, {});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan.h"
#include "profile/profile_data.h"

namespace kvplan::report {

struct MemoryOptions {
  uint64_t gpu_memory_bytes = uint64_t{80} << 30;  // 80 GiB
  uint64_t weights_bytes = 0;                      // taken from the GPU memory first
  std::vector<int64_t> contexts = {4096, 32768, 131072};
};

struct NamedProfile {
  Profile profile;
  std::string file_name;  // shown in the report; a name, not a path, so reports do not depend on
                          // where the checkout lives
};

struct NamedPlan {
  Plan plan;
  std::string file_name;
};

// [layer][candidate] values of one metric.
struct Heatmap {
  std::string metric;  // "dKL" or "e_o"
  std::string description;
  std::vector<std::string> candidates;
  std::vector<std::vector<double>> values;
};

struct LayerRow {
  int index = 0;
  int group = 0;
  KvPair pair;
  std::vector<KvPair> heads;  // a per-KV-head layer's pairs per head (then `pair` is unused)
  double key_bytes_per_token = 0, value_bytes_per_token = 0;
  std::optional<double> dkl, e_o;          // the profile's cell for the chosen pair, if profiled
  std::optional<double> surrogate_weight;  // the refit surrogate's weight of this layer (its
                                           // heads' mean in a per-head plan)

  // The K (keys) or V column: the format, or a per-head layer's formats per head ("q8_0 q4_0").
  [[nodiscard]] std::string side_text(bool keys) const;
};

// A point of the search's Pareto front (memory in the plan's memory measure).
struct FrontPoint {
  double memory = 0, equivalent_bits = 0, bytes_per_token = 0, predicted_error = 0;
  std::optional<double> mean_kl;  // measured on the selection text, where the search validated it
  std::string source;             // "exact" (additive surrogate, DP), "nsga2" (corrected), or ""
};

struct BaselinePoint {
  std::string kv;
  double memory = 0, equivalent_bits = 0, bytes_per_token = 0;
  bool within_budget = false;
  double mean_kl = 0, top1_agreement = 0, ppl = 0;
  std::optional<double> predicted_error;  // under the refit surrogate; only for profiled pairs
  // plan - baseline mean KL on the report text and its paired bootstrap 95 % interval.
  std::optional<double> kl_difference, kl_difference_low, kl_difference_high;
  std::string verdict;           // "plan lower", "plan higher", "no difference"
  std::string measured_because;  // the plan's reasons, "; "-joined (empty in older plans)
};

struct ValidationPoint {
  int round = 0;
  double memory = 0, predicted_error = 0, mean_kl = 0;
};

struct MemoryRow {
  std::string label;
  bool is_plan = false;
  double equivalent_bits = 0, bytes_per_token = 0, compression_vs_bf16 = 0;
  std::vector<uint64_t> bytes_per_sequence;  // one per MemoryOptions::contexts entry
  std::vector<int64_t> sequences_that_fit;   // whole sequences of that context in the memory left
  int64_t longest_context = 0;               // the longest single sequence that fits
};

// A plan searched for one serving engine (`kvplan search --engine E`), for the table that sets
// the best plan each engine runs beside kvplan's own at one budget.
struct EnginePlanRow {
  std::string engine;     // "vllm"; "kvplan" for a plan searched without --engine
  std::string structure;  // the per-layer structure the search took for it
  std::string file;
  double bytes_per_token = 0;
  std::optional<double> mean_kl, top1;
  std::string best_uniform;  // the best uniform pair of any format on the same text
  std::optional<double> best_uniform_kl, diff, diff_low, diff_high;  // plan - best uniform
};

struct ReportData {
  std::string profile_file, plan_file;
  KvModel model;
  QuantSettings quantization;
  std::string scale_dtype;
  PlanSummary summary;

  Heatmap dkl, e_o;
  std::vector<LayerRow> layers;

  std::string memory_measure;  // "equivalent_bits" or "bytes_per_token" (plan provenance)
  std::string budget;          // as given to the search, e.g. "4 equivalent bits"
  std::vector<FrontPoint> front;
  std::vector<BaselinePoint> baselines;
  std::vector<ValidationPoint> validations;
  std::vector<LongContextRow> long_context;  // the plan and the best uniform pair per context
  std::string long_context_baseline;         // the uniform pair the long-context rows compare with
  std::optional<double> plan_mean_kl, plan_top1, plan_ppl, plan_ppl_exact, plan_predicted;
  bool validated = false;

  MemoryOptions memory;
  uint64_t available_bytes = 0;
  // Which layers hold only a sliding window of each sequence, and what that does to the bytes per
  // sequence; empty when every layer keeps every token.
  std::string sliding_window_note;
  std::vector<MemoryRow> memory_rows;

  // Plans searched per serving engine at the plan's budget (report --engine-plans); empty: none.
  std::vector<EnginePlanRow> engine_plans;

  // Label / value rows, in display order.
  std::vector<std::pair<std::string, std::string>> validation_facts;
  std::vector<std::pair<std::string, std::string>> provenance;
  std::vector<std::string> warnings;  // e.g. the plan was searched on another profile
};

// Throws Error(kInvalidArgument) naming the file and field when the plan and the profile describe
// different models (fingerprint, layer count), the profile is incomplete, a recorded field has
// the wrong type, or the memory options are out of range.
// "-0.0123 [-0.0150, -0.0097] plan lower", or "" when the baseline has no interval.
std::string kl_difference_text(const BaselinePoint& b);

// The front points a table shows: at most `limit` evenly spaced, plus every measured one.
std::vector<size_t> front_rows_shown(const std::vector<FrontPoint>& front, size_t limit = 16);

ReportData build_report_data(const NamedProfile& profile, const NamedPlan& plan,
                             const MemoryOptions& memory);

// The row of a plan searched with --engine (or without: "kvplan"). Throws Error(kInvalidArgument)
// naming the file when the plan is not of the report plan's model (fingerprint), was searched at
// another budget, or has no measured quality.
EnginePlanRow engine_plan_row(const NamedPlan& plan, const Plan& report_plan);

}  // namespace kvplan::report
