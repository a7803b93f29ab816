// From a profile to a validated plan (ARCHITECTURE §1): intra-layer Pareto pruning, the exact
// front of the additive surrogate, NSGA-II on the corrected surrogate, the validation loop on the
// SELECTION text, then the chosen plan and the uniform baselines measured on the REPORT text
// (never used to choose) with paired bootstrap intervals — and the plan.json that ships.
//
//   TuneOptions opt;  opt.budget = 6480;  // bytes per token
//   TuneOutput out = tune_plan(profile, selection, report, opt);
//   write_plan("plan.json", out.plan);
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "engines/engine.h"
#include "plan/plan.h"
#include "profile/profile_data.h"
#include "search/held_out_kl.h"
#include "search/layer_groups.h"
#include "search/long_context_kl.h"
#include "profile/pair_view.h"
#include "search/validation_loop.h"

namespace kvplan::search {

enum class ClusterMode { kOff, kOn, kAuto };  // auto: on only when it costs < 1 % at the budget

struct TuneOptions {
  SensitivityMetric metric = SensitivityMetric::kDkl;
  MemoryMeasure measure = MemoryMeasure::kBytes;
  double budget = std::numeric_limits<double>::infinity();  // on `measure`
  // > 0: the budget in effective bits per value; tune_plan turns it into bytes per token.
  double max_effective_bits = 0;
  std::string budget_description;  // as the user gave it, for provenance
  // Per layer, the share of a context's tokens the layer holds (min(context, window) / context:
  // below 1 on sliding-window layers); empty = every layer holds every token. Scales each layer's
  // bytes per token, so that a budget of GPU memory at one context counts what the cache holds.
  std::vector<double> layer_token_share;
  // The serving engine the plan must run on: its formats and its layer structure only.
  EngineId engine = EngineId::kKvplan;
  ClusterMode cluster = ClusterMode::kAuto;
  DbscanOptions dbscan;
  Nsga2Options search;
  ValidationLoopOptions loop;
  int uniform_validations = 2;  // best-predicted uniform configurations measured on SELECTION
  int report_baselines = 4;     // uniform configurations within budget measured on REPORT (0: all)
  // Also measured on REPORT when within the budget: the engines' and KVTuner's usual settings.
  std::vector<std::string> reference_baselines = {
      "q8_0/q8_0", "q4_0/q4_0", "q8_0/q4_0", "KV8", "K8V4", "KV4", "K4V2", "KV2", "iq4_nl/iq4_nl"};
  int bootstrap_resamples = 2000;
  std::string tool_version;
  std::string created;
};

// A text set the tuning measures on, with its exact-KV reference computed once.
struct TextSet {
  const HeldOutKl* kl = nullptr;
  // The report text only: the plan and the best uniform baseline at long contexts (none: off).
  const LongContextKl* long_context = nullptr;
  std::string source;  // file name only: the plan must not depend on where the checkout is
  uint64_t hash = 0;
};

// One uniform configuration as measured on the report text.
struct BaselineResult {
  UniformConfig config;
  bool within_budget = false;
  bool measured = false;
  HeldOutKl::Result report;
  double diff = 0, diff_low = 0, diff_high = 0;  // plan - baseline mean KL, 95 % interval

  // "plan lower" / "plan higher" when the interval excludes zero, else "no difference".
  [[nodiscard]] const char* verdict() const {
    return diff_high < 0 ? "plan lower" : diff_low > 0 ? "plan higher" : "no difference";
  }
};

struct TuneOutput {
  Plan plan;
  TuneResult loop;
  std::vector<LayerGroup> groups;
  std::string cluster_note;  // what clustering costs against the exact front
  HeldOutKl::Result plan_report;
  std::vector<BaselineResult> baselines;  // every uniform configuration, by predicted error
  double rank_correlation = 0;            // Spearman, predicted vs measured (selection)
  double nsga_exact_coverage = 0;         // fraction of the exact front an unseeded NSGA-II finds
  // The plan (mean_kl[0]) and the best measured uniform baseline (mean_kl[1]) at long contexts.
  std::vector<LongContextKl::Row> long_context;
};

// Throws Error(kInvalidArgument) with the smallest feasible bytes per token when the budget is
// below every plan, and for an incomplete profile.
TuneOutput tune_plan(const Profile& profile, const TextSet& selection, const TextSet& report,
                     const TuneOptions& options);

}  // namespace kvplan::search
