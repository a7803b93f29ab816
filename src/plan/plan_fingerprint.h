// A stable 64-bit fingerprint of what a plan means for KV bytes: the model it is for, its
// geometry, the quantization settings and every layer's (key, value) format with its version.
// Descriptive fields (created, tool_version, quality, pareto_front, provenance) are left out, so
// a plan re-written with new measurements keeps its fingerprint while any change to the bytes it
// produces changes it. The runtime writes it into every stored object (ARCHITECTURE §3.3).
//
//   uint64_t fp = kvplan::plan_fingerprint(kvplan::read_plan("plan.json"));
#pragma once

#include <cstdint>

#include "plan/plan.h"

namespace kvplan {

uint64_t plan_fingerprint(const Plan& plan);

}  // namespace kvplan
