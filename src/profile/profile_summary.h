// Summaries of a profile for people and reports: how much more a layer suffers from low-bit keys
// than from low-bit values, and whether the metrics grow as bits fall.
//
//   double r = kvplan::key_value_sensitivity_ratio(profile, "dkl", "int8", "int2");
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "profile/profile_data.h"

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

}  // namespace kvplan
