// Which uniform configurations the report text measures beside the plan, and why. "Plan / best
// uniform" is taken over measured pairs only, so the set must not be only what the surrogate likes
// (its rank correlation with measurement can be weak): within the budget it holds
//   - the `top` best predicted pairs;
//   - per (key family, value family) pairing (formats/kv_format_table.h FormatFamily), its best
//     predicted pair: a family the surrogate misjudges still has its strongest member measured;
//   - among the `near_budget_top` best predicted, every pair within `near_budget_fraction` of the
//     budget's memory: the pairs that spend what the plan spends;
//   - the engines' and KVTuner's usual settings (`references`);
//   - the uniform pairs the validation loop measured on the selection text.
//
//   std::map<KvPair, std::vector<std::string>> why =
//       report_baseline_reasons(uniforms, memory_of, budget, options, validated);
//   why[KvPair::parse("q8_0/q8_0")];   // {"best of ggml/ggml", "engine or KVTuner default"}
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "formats/budget.h"
#include "formats/kv_pair.h"
#include "profile/pair_view.h"

namespace kvplan::search {

struct ReportBaselineOptions {
  int top = 4;  // 0: every uniform pair within the budget
  bool best_of_each_family_pairing = true;
  int near_budget_top = 20;
  double near_budget_fraction = 0.03;
  std::vector<std::string> references{};  // pair names (KvPair::parse)
};

// `uniforms` by predicted error (uniform_configs' order); `memory_of` a configuration's memory on
// the budget's measure. Pairs outside the budget are never listed. Reasons are short, stable
// phrases recorded in plan.json ("top 4 predicted", "best of ggml/turboquant", "within 3 % of the
// budget", "engine or KVTuner default", "validated on selection"), in that order.
std::map<KvPair, std::vector<std::string>> report_baseline_reasons(
    const std::vector<UniformConfig>& uniforms,
    const std::function<double(const UniformConfig&)>& memory_of, const Budget& budget,
    const ReportBaselineOptions& options, const std::vector<KvPair>& validated);

}  // namespace kvplan::search
