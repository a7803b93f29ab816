#include "search/validation_loop.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"

namespace kvplan::search {

void ValidationLoopOptions::validate() const {
  if (max_rounds < 1 || plans_per_round < 1 || max_evaluations < 1 ||
      min_validations_for_rank < 3) {
    fail(ErrorCode::kInvalidArgument,
         "validation loop: rounds {}, plans per round {} and evaluations {} must all be >= 1, "
         "validations to judge a refit's ranking {} >= 3",
         max_rounds, plans_per_round, max_evaluations, min_validations_for_rank);
  }
  if (!(min_improvement >= 0)) {
    fail(ErrorCode::kInvalidArgument, "validation loop: min improvement {} must be >= 0",
         min_improvement);
  }
  if (!(min_held_out_rank >= -1 && min_held_out_rank <= 1)) {
    fail(ErrorCode::kInvalidArgument,
         "validation loop: min held-out rank correlation {} must be within [-1, 1]",
         min_held_out_rank);
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

std::vector<Assignment> merged_front(const ExactFront& exact, const SearchResult& nsga) {
  std::vector<Assignment> all = exact.points;
  all.insert(all.end(), nsga.front.begin(), nsga.front.end());
  std::set<std::vector<int>> seen;
  std::erase_if(all, [&](const Assignment& a) { return !seen.insert(a.choice).second; });
  return non_dominated(std::move(all));
}

ValidationLoopResult run_validation_loop(SearchSpace space, const Nsga2Options& search,
                                         const MeasureFn& measure,
                                         const ValidationLoopOptions& options,
                                         const std::vector<ExtraPlan>& extra) {
  return run_validation_loop(std::move(space), search,
                             MeasureAllFn([&](const std::vector<std::vector<KvPair>>& plans) {
                               std::vector<double> ys;
                               for (const std::vector<KvPair>& pairs : plans)
                                 ys.push_back(measure(pairs));
                               return ys;
                             }),
                             options, extra);
}

ValidationLoopResult run_validation_loop(SearchSpace space, const Nsga2Options& search,
                                         const MeasureAllFn& measure_all,
                                         const ValidationLoopOptions& options,
                                         const std::vector<ExtraPlan>& extra) {
  options.validate();
  ValidationLoopResult result;
  result.surrogate = fit_surrogate({}, space.layers.size(), options.fit);
  std::vector<Validation> validations;
  std::set<std::vector<int>> measured_choices;
  double best = 0;
  for (int round = 1; round <= options.max_rounds; ++round) {
    space.layer_weights = result.surrogate.weights;
    space.interaction = result.surrogate.interaction;
    const SearchTable table = SearchTable::build(space);
    result.exact = exact_front(space, table);
    std::vector<std::vector<int>> seeds;
    for (const Assignment& a : result.exact.points) seeds.push_back(a.choice);
    result.nsga = nsga2_front(space, search, seeds);
    result.search_evaluations += result.nsga.evaluations;
    result.rounds = round;
    std::vector<Assignment> order = merged_front(result.exact, result.nsga);
    if (order.empty()) {
      fail(ErrorCode::kResourceExhausted, "no plan fits the memory budget {}", space.budget);
    }
    // Most promising first: lowest predicted error under the current surrogate.
    std::stable_sort(order.begin(), order.end(), [](const Assignment& a, const Assignment& b) {
      return a.predicted_error < b.predicted_error;
    });
    // The round's evaluations are chosen before any is measured (extra plans first in round 1,
    // then the most promising searched plans), then measured as one batch.
    struct Pending {
      Assignment assignment;
      std::string name;
      std::vector<double> layer_errors;
    };
    std::vector<Pending> pending;
    const size_t measured_before = result.measured.size();
    const auto budget_left = [&] {
      return static_cast<int>(measured_before + pending.size()) < options.max_evaluations;
    };
    if (round == 1) {
      for (const ExtraPlan& x : extra) {
        if (!budget_left()) break;
        if (!within_budget(x.memory, space.budget)) continue;
        Assignment a;
        a.pairs = x.pairs;
        a.memory = x.memory;
        a.predicted_error = predict(result.surrogate, x.layer_errors);
        pending.push_back({std::move(a), x.name, x.layer_errors});
      }
    }
    // After round 1 the surrogate is fitted to measured errors, so its prediction can be held
    // against the best one measured: a plan predicted no better is not worth an evaluation.
    const double worth_measuring_below = best * (1 - options.min_improvement);
    int measured_now = 0;
    for (const Assignment& a : order) {
      if (measured_now == options.plans_per_round || !budget_left()) break;
      if (round > 1 && !(a.predicted_error < worth_measuring_below)) break;
      if (!measured_choices.insert(a.choice).second) continue;
      pending.push_back({a, "", layer_errors(space, a)});
      ++measured_now;
    }
    std::vector<std::vector<KvPair>> batch;
    for (const Pending& p : pending) batch.push_back(p.assignment.pairs);
    const std::vector<double> ys = batch.empty() ? std::vector<double>{} : measure_all(batch);
    if (ys.size() != batch.size()) {
      fail(ErrorCode::kInternal, "validation loop: {} plans measured, {} results", batch.size(),
           ys.size());
    }
    for (size_t k = 0; k < pending.size(); ++k) {
      Pending& p = pending[k];
      spdlog::info("round {}: {} at {:.3f} predicted {:.5f}, measured {:.5f}", round,
                   p.name.empty() ? "plan" : p.name, p.assignment.memory,
                   p.assignment.predicted_error, ys[k]);
      validations.push_back({std::move(p.layer_errors), ys[k]});
      result.measured.push_back({std::move(p.assignment), p.name, ys[k], round});
    }
    const auto best_it = std::min_element(
        result.measured.begin(), result.measured.end(),
        [](const MeasuredPlan& a, const MeasuredPlan& b) { return a.measured < b.measured; });
    const double new_best = best_it->measured;
    const bool improved = round == 1 || new_best < best * (1 - options.min_improvement);
    best = std::min(round == 1 ? new_best : best, new_best);
    result.surrogate = fit_surrogate(validations, space.layers.size(), options.fit);
    ValidationRound log{round, static_cast<int>(result.measured.size() - measured_before), best,
                        held_out_rank_correlation(validations, space.layers.size(), options.fit),
                        ""};
    const bool judged = static_cast<int>(validations.size()) >= options.min_validations_for_rank;
    const bool ranks = !judged || !(log.held_out_rank < options.min_held_out_rank);  // NaN: none
    bool go_on = false;
    if (measured_now == 0) {
      log.next = round == 1 ? "stopped: no searched plan to measure"
                            : fmt::format(
                                  "stopped: no unmeasured plan is predicted below the best "
                                  "measured error by {:g} %",
                                  100 * options.min_improvement);
    } else if (!improved) {
      log.next = fmt::format("stopped: the best measured error improved by less than {:g} %",
                             100 * options.min_improvement);
    } else if (!budget_left()) {
      log.next = fmt::format("stopped: the {} evaluations are spent", options.max_evaluations);
    } else if (round == options.max_rounds) {
      log.next = fmt::format("stopped: {} rounds", options.max_rounds);
    } else if (!ranks) {
      log.next = fmt::format(
          "stopped: the refit ranks the measured plans held out at {:.2f} < "
          "{:g}, not trusted to choose plans",
          log.held_out_rank, options.min_held_out_rank);
    } else {
      log.next = "next round with the refit";
      go_on = true;
    }
    spdlog::info("round {}: held-out rank correlation of the refit {:.2f}; {}", round,
                 log.held_out_rank, log.next);
    result.round_log.push_back(std::move(log));
    if (!go_on) break;
  }
  result.chosen = *std::min_element(
      result.measured.begin(), result.measured.end(),
      [](const MeasuredPlan& a, const MeasuredPlan& b) { return a.measured < b.measured; });
  return result;
}

}  // namespace kvplan::search
