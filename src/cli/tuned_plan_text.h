// What `kvplan tune` and `kvplan search` print: the plan written, its memory, the quality it was
// chosen with and measured at, the search's work, every measured uniform baseline with its
// interval, and the long-context rows; or the plan as JSON.
#pragma once

#include <string>

#include "pipeline/tune.h"

namespace kvplan::cli {

void print_tuned_plan(const pipeline::TunedPlan& tuned, const std::string& output, bool json);

}  // namespace kvplan::cli
