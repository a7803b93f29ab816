// A chosen plan as plan.json records it (src/plan/plan.h): the layers with their formats and
// fp8 scales, quality on the report text (and the selection text that chose it), every uniform
// baseline within the budget with its interval, the fronts, and the search's provenance.
//
//   SearchOutcome out = choose_plan(in);
//   Plan plan = record_plan(in, out, {.tool_version = "0.1.0", .created = "2026-12-04T10:00:00Z"});
#pragma once

#include <string>

#include "plan/plan.h"
#include "search/choose_plan.h"

namespace kvplan::search {

struct RecordStamp {
  std::string tool_version;
  std::string created;  // UTC, "2026-12-04T10:00:00Z"
};

Plan record_plan(const SearchInputs& inputs, const SearchOutcome& outcome,
                 const RecordStamp& stamp);

}  // namespace kvplan::search
