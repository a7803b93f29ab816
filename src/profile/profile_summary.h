// Summaries of a profile for people and reports: how much more a layer suffers from low-bit keys
// than from low-bit values, and whether the metrics grow as bits fall; and ProfileSummary, what
// `kvplan profile` reports after a run or a merge (as text, or as JSON with --json).
//
//   double r = kvplan::key_value_sensitivity_ratio(profile, "dkl", "int8", "int2");
//   kvplan::ProfileSummary s = kvplan::summarize_profile(profile);
//   nlohmann::ordered_json j = kvplan::profile_summary_to_json(s);
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "profile/dkl_estimate.h"
#include "profile/profile_data.h"
#include "profile/profile_timings.h"

namespace kvplan {

// The named metric of a cell ("e_k", "e_v", "e_a", "e_o", "dkl").
double cell_metric(const CellMetrics& m, std::string_view metric);

// sum over layers of metric(K=low, V=high) / sum over layers of metric(K=high, V=low), e.g.
// dKL(K2V8) / dKL(K8V2): > 1 when keys are the more sensitive side. In a side profile the other
// side is exact instead: dKL(int2 keys alone) / dKL(int2 values alone). Empty when either pair is
// not a candidate or a layer lacks it.
std::optional<double> key_value_sensitivity_ratio(const Profile& profile, std::string_view metric,
                                                  std::string_view high_format,
                                                  std::string_view low_format);

// Layers where the uniform pairs KV8, KV4, KV2 (when all are candidates) do not give
// metric(KV8) < metric(KV4) < metric(KV2) for every metric — or, in a side profile, where int8 <
// int4 < int2 fails for keys alone or values alone; "" when none. e.g. "layer 3 e_a".
std::string monotonicity_violations(const Profile& profile);

// key_value_sensitivity_ratio(profile, metric, "int8", low_format).
struct KeyValueRatio {
  std::string metric;      // "dkl", "e_o"
  std::string low_format;  // "int4", "int2"
  double ratio = 0;

  [[nodiscard]] std::string name() const { return metric + "_" + low_format; }  // "dkl_int4"
};

struct ProfileSummary {
  size_t output_cells = 0;  // cells present
  size_t total_cells = 0;
  bool complete = false;
  // dkl and e_o, for int4 and int2 keys or values low, as far as the candidates give them.
  std::vector<KeyValueRatio> key_value_ratios;
  std::optional<ModelCheck> additivity;  // complete profiles with measured joint cells only
  size_t dkl_measured_cells = 0;
  std::string monotonicity_violations;  // "" when KV8 < KV4 < KV2 everywhere (or not checkable)
  ProfileTimings timings;
};

ProfileSummary summarize_profile(const Profile& profile);
// Keys in this order: output_cells, total_cells, complete, key_value_ratio {"dkl_int4": ...}
// (when any), additivity {joint_cells, mean_abs_rel_error, max_abs_rel_error, worst_layer,
// worst_pair} (when present), dkl_measured_cells, monotonic_kv8_kv4_kv2, monotonicity_violations
// (when any), timings.
nlohmann::ordered_json profile_summary_to_json(const ProfileSummary& summary);

}  // namespace kvplan
