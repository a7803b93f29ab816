// The validation loop of `kvplan tune`: search the surrogate, measure the most promising plans on
// the real model, refit the surrogate, and repeat until the best measured plan stops improving or
// the evaluation budget is spent. Real evaluations go only where they decide.
//
//   TuneResult r = run_validation_loop(space, nsga2_options, measure_kl, loop_options);
//   r.chosen;  // the validated plan with the lowest measured error within the budget
#pragma once

#include <functional>
#include <vector>

#include "search/nsga2_search.h"
#include "search/surrogate.h"

namespace kvplan::search {

struct ValidationLoopOptions {
  int max_rounds = 4;
  int plans_per_round = 3;        // lowest predicted error first, never the same plan twice
  int max_evaluations = 12;       // real evaluations in all
  double min_improvement = 0.01;  // stop when the best measured error improves by less (relative)
  SurrogateFitOptions fit;

  void validate() const;
};

// Measures the real error (e.g. mean KL vs exact KV on held-out prompts) of per-layer pairs, one
// per entry of SearchSpace::layers.
using MeasureFn = std::function<double(const std::vector<KvPair>& pairs)>;

struct MeasuredPlan {
  Assignment assignment;
  double measured = 0;
  int round = 0;
};

struct TuneResult {
  MeasuredPlan chosen;
  std::vector<MeasuredPlan> measured;  // every real evaluation, in order
  std::vector<double> weights;         // the final surrogate weights, per layer entry
  SearchResult last_search;            // the last round's front (searched before the final refit)
  int rounds = 0;
  unsigned search_evaluations = 0;  // surrogate evaluations over all rounds
};

// Per-layer sensitivities of an assignment, the surrogate's features.
std::vector<double> layer_errors(const SearchSpace& space, const Assignment& assignment);

// Throws Error(kResourceExhausted) if no plan within the budget exists.
TuneResult run_validation_loop(SearchSpace space, const Nsga2Options& search,
                               const MeasureFn& measure, const ValidationLoopOptions& options);

}  // namespace kvplan::search
