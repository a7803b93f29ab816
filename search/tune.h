// From a profile to a validated plan (ARCHITECTURE §1, KVTuner §4): intra-layer Pareto pruning,
// layer grouping, NSGA-II over the surrogate under a memory budget, the validation loop on the real
// model, uniform baselines measured the same way, and the plan.json that ships to serving.
//
//   TuneOptions opt;  opt.budget = 4.0;  // mean equivalent bits
//   TuneOutput out = tune_plan(profile, held_out, opt);
//   write_plan("plan.json", out.plan);
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "profile/profile_data.h"
#include "search/held_out_kl.h"
#include "search/layer_groups.h"
#include "search/validation_loop.h"

namespace kvplan::search {

enum class SensitivityMetric { kDkl, kEo };

struct TuneOptions {
  SensitivityMetric metric = SensitivityMetric::kDkl;
  MemoryMeasure measure = MemoryMeasure::kBits;
  double budget = std::numeric_limits<double>::infinity();  // on `measure`
  std::string budget_description;                           // as the user gave it, for provenance
  DbscanOptions dbscan;
  Nsga2Options search;
  ValidationLoopOptions loop;
  // Uniform configurations measured like the plan; those that cannot pack the model are skipped.
  std::vector<std::string> baselines = {"KV8", "K8V4",      "KV4",       "K4V2",
                                        "KV2", "q8_0/q8_0", "q8_0/q4_0", "q4_0/q4_0"};
  std::string tool_version;
  std::string created;
};

struct TuneOutput {
  Plan plan;
  TuneResult loop;
  std::vector<LayerGroup> groups;
};

// The search's view of a complete profile: per layer, every candidate's bits, bytes and error.
// Throws Error(kInvalidArgument) for an incomplete profile (a shard: merge first).
std::vector<LayerCandidates> candidates_from_profile(const Profile& profile,
                                                     SensitivityMetric metric);

// The profile's identity hash: its bytes without the machine-dependent timings.
std::string profile_hash(const Profile& profile);

TuneOutput tune_plan(const Profile& profile, const HeldOutKl& held_out,
                     const std::string& held_out_source, uint64_t held_out_hash,
                     const TuneOptions& options);

}  // namespace kvplan::search
