#include "search/report_baselines.h"

#include <set>
#include <utility>

#include <fmt/format.h>

#include "formats/format.h"

namespace kvplan::search {

std::map<KvPair, std::vector<std::string>> report_baseline_reasons(
    const std::vector<UniformConfig>& uniforms,
    const std::function<double(const UniformConfig&)>& memory_of, const Budget& budget,
    const ReportBaselineOptions& options, const std::vector<KvPair>& validated) {
  std::map<KvPair, std::vector<std::string>> why;
  std::vector<const UniformConfig*> fitting;
  for (const UniformConfig& u : uniforms) {
    if (budget.fits(memory_of(u))) fitting.push_back(&u);
  }
  const auto add = [&](const KvPair& pair, std::string reason) {
    std::vector<std::string>& reasons = why[pair];
    if (reasons.empty() || reasons.back() != reason) reasons.push_back(std::move(reason));
  };

  const std::string top_reason = options.top == 0 ? "every pair within the budget"
                                                  : fmt::format("top {} predicted", options.top);
  for (size_t i = 0; i < fitting.size(); ++i) {
    if (options.top != 0 && static_cast<int>(i) >= options.top) break;
    add(fitting[i]->pair, top_reason);
  }
  if (options.best_of_each_family_pairing) {
    std::set<std::pair<FormatFamily, FormatFamily>> seen;
    for (const UniformConfig* u : fitting) {  // by predicted error: the first of each is its best
      const auto families = std::pair{u->pair.key.family(), u->pair.value.family()};
      if (!seen.insert(families).second) continue;
      add(u->pair, fmt::format("best of {}/{}", format_family_name(families.first),
                               format_family_name(families.second)));
    }
  }
  if (budget.bounded() && options.near_budget_top > 0) {
    const std::string reason =
        fmt::format("within {:g} % of the budget", 100 * options.near_budget_fraction);
    for (size_t i = 0; i < fitting.size() && static_cast<int>(i) < options.near_budget_top; ++i) {
      if (memory_of(*fitting[i]) >= (1 - options.near_budget_fraction) * budget.limit) {
        add(fitting[i]->pair, reason);
      }
    }
  }
  std::set<KvPair> references;
  for (const std::string& name : options.references) references.insert(KvPair::parse(name));
  std::set<KvPair> loop(validated.begin(), validated.end());
  for (const UniformConfig* u : fitting) {
    if (references.contains(u->pair)) add(u->pair, "engine or KVTuner default");
    if (loop.contains(u->pair)) add(u->pair, "validated on selection");
  }
  return why;
}

}  // namespace kvplan::search
