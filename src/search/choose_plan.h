// From a profile to a chosen plan (docs/architecture.md §3): the engine's search space over the
// profile's pair view, the exact front of the additive surrogate, optional layer clustering, the
// validation loop (NSGA-II on the corrected surrogate, plans measured on the SELECTION text), then
// the chosen plan and the uniform baselines measured on the REPORT text (never used to choose)
// with paired bootstrap intervals. search/plan_record.h turns the outcome into plan.json.
//
//   SearchInputs in{&profile, kv_model(weights), budget, options, selection, report};
//   SearchOutcome out = choose_plan(in);
//   Plan plan = record_plan(in, out);
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engines/engine.h"
#include "formats/budget.h"
#include "formats/kv_geometry.h"
#include "profile/pair_view.h"
#include "profile/profile_data.h"
#include "search/held_out_kl.h"
#include "search/layer_groups.h"
#include "search/long_context_kl.h"
#include "search/paired_stats.h"
#include "search/report_baselines.h"
#include "search/validation_loop.h"

namespace kvplan::search {

enum class ClusterMode { kOff, kOn, kAuto };  // auto: on only when it costs < 1 % at the budget

// A plan measured on the report text beside the chosen one (`--compare-plan`).
struct PlanToCompare {
  std::string source;          // file name
  std::vector<KvPair> config;  // one pair per layer, or per KV head (Plan::kv_config)
  bool per_head = false;
  double bytes_per_token = 0;
};

// How the search runs (the budget is apart: formats/budget.h).
struct SearchOptions {
  SensitivityMetric metric = SensitivityMetric::kDkl;
  // Whether each layer, or each KV head of each layer, takes its own pair (profile/pair_view.h).
  KvGranularity granularity = KvGranularity::kLayer;
  // The serving engine the plan must run on: its formats and its layer structure only.
  EngineId engine = EngineId::kKvplan;
  ClusterMode cluster = ClusterMode::kAuto;
  DbscanOptions dbscan;
  Nsga2Options nsga2;
  ValidationLoopOptions loop;
  int uniform_validations = 2;  // best-predicted uniform configurations measured on SELECTION
  // The uniform configurations measured on REPORT beside the plan (search/report_baselines.h):
  // the best predicted, each format-family pairing's best, those near the budget among the top
  // 20 predicted, and the engines' and KVTuner's usual settings, all within the budget. The
  // llama.cpp defaults are listed rotated too: it rotates quantized K/V when head_dim % 64 == 0.
  ReportBaselineOptions report_baselines{.references = {"q8_0/q8_0",
                                                        "q4_0/q4_0",
                                                        "q8_0/q4_0",
                                                        "q8_0_had/q8_0_had",
                                                        "q4_0_had/q4_0_had",
                                                        "KV8",
                                                        "K8V4",
                                                        "KV4",
                                                        "K4V2",
                                                        "KV2",
                                                        "iq4_nl/iq4_nl",
                                                        "fp8_e4m3/fp8_e4m3",
                                                        "nvfp4/nvfp4",
                                                        "fp8_per_token_head/fp8_per_token_head",
                                                        "int8_per_token_head/int8_per_token_head",
                                                        "int4_per_token_head/int4_per_token_head",
                                                        "tq_fp8/tq_int4",
                                                        "tq_mse4/tq_int4",
                                                        "tq_mse3/tq_int4",
                                                        "tq_mse3/tq_int3"}};
  int bootstrap_resamples = 2000;
  std::vector<PlanToCompare> compare_plans{};
};

// A text set the search measures on, with its exact-KV reference computed once.
struct TextSet {
  const HeldOutKl* kl = nullptr;
  // The report text only: the plan and the best uniform baseline at long contexts (none: off).
  const LongContextKl* long_context = nullptr;
  std::string source;  // file name only: the plan must not depend on where the checkout is
  uint64_t hash = 0;
};

// Everything the search reads.
struct SearchInputs {
  const Profile* profile = nullptr;  // complete (merged), of `model`
  KvModel model;                     // the model validated on: its identity and KV geometry
  Budget budget;
  SearchOptions options;
  TextSet selection, report;
};

// One uniform configuration as measured on the report text.
struct BaselineResult {
  UniformConfig config;
  bool within_budget = false;
  bool measured = false;
  std::vector<std::string> measured_because;  // search/report_baselines.h's reasons
  HeldOutKl::Result report;
  double diff = 0, diff_low = 0, diff_high = 0;  // plan - baseline mean KL, 95 % interval

  // "plan lower" / "plan higher" when the interval excludes zero, else "no difference".
  [[nodiscard]] const char* verdict() const { return paired_verdict(diff_low, diff_high); }
};

// Another plan on the report text: its result and the chosen plan's paired difference from it.
struct ComparedPlanResult {
  PlanToCompare plan;
  HeldOutKl::Result report;
  double diff = 0, diff_low = 0, diff_high = 0;  // chosen - compared, 95 % interval
};

struct SearchOutcome {
  SearchSpace space;         // the space searched (its layers priced, its groups used)
  std::string structure;     // the engine's structure taken (--engine); empty for kvplan's own
  std::string cluster_note;  // what clustering costs against the exact front
  // The additive surrogate's least error within the budget (the exact per-layer front's end) and
  // the uniform pair it predicts best there: allocation's headroom (plan.json's
  // quality.allocation_headroom). No uniform pair fits: none.
  double best_plan_predicted = 0;
  std::optional<UniformConfig> best_predicted_uniform;
  ValidationLoopResult loop;  // rounds, every plan measured on SELECTION, the chosen one
  HeldOutKl::Result plan_report;
  std::vector<BaselineResult> baselines;  // every uniform configuration, by predicted error
  std::optional<size_t> best_baseline;    // the measured one with the least mean KL on REPORT
  double rank_correlation = 0;            // Spearman, predicted vs measured (selection)
  // Spearman of the final surrogate's predictions against the report text's mean KL over the plan
  // and the measured uniform baselines; NaN with fewer than 2 of them.
  double rank_correlation_on_report = 0;
  double nsga_exact_coverage = 0;  // fraction of the exact front an unseeded NSGA-II finds
  // The plan (mean_kl[0]) and the best measured uniform baseline (mean_kl[1]) at long contexts.
  std::vector<LongContextKl::Row> long_context;
  std::vector<ComparedPlanResult> compared;  // SearchOptions::compare_plans, in order
  // Every real evaluation, by configuration (one pair per search entry: layer or KV head).
  std::map<std::vector<KvPair>, HeldOutKl::Result> on_selection, on_report;
};

// Throws Error(kInvalidArgument) with the smallest feasible memory when the budget is below every
// plan, and for an incomplete profile or one of another model.
SearchOutcome choose_plan(const SearchInputs& inputs);

}  // namespace kvplan::search
