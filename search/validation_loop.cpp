#include "search/validation_loop.h"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace kvplan::search {

void ValidationLoopOptions::validate() const {
  if (max_rounds < 1 || plans_per_round < 1 || max_evaluations < 1) {
    fail(ErrorCode::kInvalidArgument,
         "validation loop: rounds {}, plans per round {} and evaluations {} must all be >= 1",
         max_rounds, plans_per_round, max_evaluations);
  }
  if (!(min_improvement >= 0)) {
    fail(ErrorCode::kInvalidArgument, "validation loop: min improvement {} must be >= 0",
         min_improvement);
  }
}

std::vector<double> layer_errors(const SearchSpace& space, const Assignment& assignment) {
  std::vector<double> errors;
  errors.reserve(space.layers.size());
  for (size_t i = 0; i < space.layers.size(); ++i) {
    const auto& cands = space.layers[i].candidates;
    const auto it = std::find_if(cands.begin(), cands.end(), [&](const LayerCandidate& c) {
      return c.pair == assignment.pairs[i];
    });
    if (it == cands.end()) {
      fail(ErrorCode::kInternal, "layer {} has no candidate {}", space.layers[i].layer,
           assignment.pairs[i].name());
    }
    errors.push_back(it->error);
  }
  return errors;
}

TuneResult run_validation_loop(SearchSpace space, const Nsga2Options& search,
                               const MeasureFn& measure, const ValidationLoopOptions& options) {
  options.validate();
  TuneResult result;
  result.weights.assign(space.layers.size(), 1.0);
  std::vector<Validation> validations;
  std::set<std::vector<int>> measured_choices;
  double best = 0;
  for (int round = 1; round <= options.max_rounds; ++round) {
    space.layer_weights = result.weights;
    result.last_search = nsga2_front(space, search);
    result.search_evaluations += result.last_search.evaluations;
    result.rounds = round;
    if (result.last_search.front.empty()) {
      fail(ErrorCode::kResourceExhausted, "no plan fits the memory budget {}", space.budget);
    }
    // Most promising first: lowest predicted error under the current surrogate.
    std::vector<Assignment> order = result.last_search.front;
    std::stable_sort(order.begin(), order.end(), [](const Assignment& a, const Assignment& b) {
      return a.predicted_error < b.predicted_error;
    });
    int measured_now = 0;
    for (const Assignment& a : order) {
      if (measured_now == options.plans_per_round ||
          static_cast<int>(result.measured.size()) == options.max_evaluations) {
        break;
      }
      if (!measured_choices.insert(a.choice).second) continue;
      const double y = measure(a.pairs);
      result.measured.push_back({a, y, round});
      validations.push_back({layer_errors(space, a), y});
      ++measured_now;
      spdlog::info("round {}: plan at {:.3f} predicted {:.5f}, measured {:.5f}", round, a.memory,
                   a.predicted_error, y);
    }
    const auto best_it = std::min_element(
        result.measured.begin(), result.measured.end(),
        [](const MeasuredPlan& a, const MeasuredPlan& b) { return a.measured < b.measured; });
    const double new_best = best_it->measured;
    const bool improved = round == 1 || new_best < best * (1 - options.min_improvement);
    best = std::min(round == 1 ? new_best : best, new_best);
    result.weights = fit_surrogate_weights(validations, space.layers.size(), options.fit);
    if (!improved || measured_now == 0 ||
        static_cast<int>(result.measured.size()) >= options.max_evaluations) {
      break;
    }
  }
  result.chosen = *std::min_element(
      result.measured.begin(), result.measured.end(),
      [](const MeasuredPlan& a, const MeasuredPlan& b) { return a.measured < b.measured; });
  return result;
}

}  // namespace kvplan::search
