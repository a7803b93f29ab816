// The validation loop of `kvplan tune`: each round solves the additive surrogate exactly
// (exact_front.h), lets NSGA-II search the corrected, non-additive surrogate seeded with that
// front, measures the most promising plans on the real model (the selection text), refits the
// surrogate (surrogate.h) and repeats until the best measured plan stops improving or the
// evaluation budget is spent. Extra plans (e.g. the best uniform configurations) are measured in
// the first round and compete on equal terms: the chosen plan is the lowest measured error.
//
// A refit earns the next round only when it ranks: held out one at a time, its predictions of the
// plans already measured must rank them with a Spearman correlation of at least
// `min_held_out_rank` (surrogate.h, held_out_rank_correlation), judged once there are
// `min_validations_for_rank` validations. After round 1 a plan is measured
// only when the refit predicts it beats the best measured error by `min_improvement`: a refit is
// fitted to the measured scale, and a plan it predicts to be worse is not worth a real
// evaluation. (In the committed references every one of the 21 plans round 2 measured before these
// rules was predicted no better than round 1's best and measured worse than it.)
//
//   ValidationLoopResult r = run_validation_loop(space, nsga2_options, measure_kl, loop_options,
//   extra); r.chosen;  // the validated plan with the lowest measured error within the budget
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "search/exact_front.h"
#include "search/nsga2_search.h"
#include "search/surrogate.h"

namespace kvplan::search {

struct ValidationLoopOptions {
  int max_rounds = 4;
  int plans_per_round = 3;         // lowest predicted error first, never the same plan twice
  int max_evaluations = 12;        // real evaluations in all (extra plans included)
  double min_improvement = 0.01;   // stop when the best measured error improves by less (relative)
  double min_held_out_rank = 0.6;  // a refit ranking its validations worse is not used
  // ... once there are this many validations: Spearman over 3 or 4 points is one swap of two
  // near-tied plans away from 0.5 (a noise-free refit that would find a better plan was refused).
  int min_validations_for_rank = 5;
  SurrogateFitOptions fit;

  void validate() const;
};

// Measures the real error (e.g. mean KL vs exact KV on the selection prompts) of per-layer pairs,
// one per entry of SearchSpace::layers.
using MeasureFn = std::function<double(const std::vector<KvPair>& pairs)>;
// The same for a round's plans at once, one result per plan in order (HeldOutKl::measure_all: a
// prompt whose exact logits were not kept runs its exact forward once for the batch).
using MeasureAllFn = std::function<std::vector<double>(const std::vector<std::vector<KvPair>>&)>;

// A plan from outside the searched space (its pairs may have been pruned from some layers).
struct ExtraPlan {
  std::string name;                  // e.g. "uniform q4_0/q5_0"
  std::vector<KvPair> pairs;         // per entry of SearchSpace::layers
  double memory = 0;                 // in the space's measure
  std::vector<double> layer_errors;  // e_l per entry, for the refit
};

struct MeasuredPlan {
  Assignment assignment;  // choice is empty for an extra plan
  std::string name;       // the extra plan's name; empty for searched plans
  double measured = 0;
  int round = 0;
};

// One round of the loop: what it measured and what its refit was worth.
struct ValidationRound {
  int round = 0;
  int measured = 0;          // real evaluations this round (extra plans included)
  double best_measured = 0;  // the lowest measured error after this round
  double held_out_rank = 0;  // of the refit after this round; NaN if it could not be computed
  std::string next;          // why the loop went on or stopped after this round
};

struct ValidationLoopResult {
  MeasuredPlan chosen;
  std::vector<MeasuredPlan> measured;  // every real evaluation, in order
  SurrogateModel surrogate;            // the final refit
  ExactFront exact;                    // the last round's exact front (additive surrogate)
  SearchResult nsga;                   // the last round's NSGA-II front (corrected surrogate)
  int rounds = 0;
  std::vector<ValidationRound> round_log;  // one per round, in order
  unsigned search_evaluations = 0;         // surrogate evaluations over all rounds
};

// Per-layer sensitivities of an assignment, the surrogate's features.
std::vector<double> layer_errors(const SearchSpace& space, const Assignment& assignment);

// The searched candidates of one round: the exact front and NSGA-II's, non-dominated under the
// full objective, within the budget.
std::vector<Assignment> merged_front(const ExactFront& exact, const SearchResult& nsga);

// Throws Error(kResourceExhausted) if no plan within the budget exists. Each round chooses its
// evaluations before measuring them, so both forms give the same loop.
ValidationLoopResult run_validation_loop(SearchSpace space, const Nsga2Options& search,
                                         const MeasureAllFn& measure_all,
                                         const ValidationLoopOptions& options,
                                         const std::vector<ExtraPlan>& extra = {});
ValidationLoopResult run_validation_loop(SearchSpace space, const Nsga2Options& search,
                                         const MeasureFn& measure,
                                         const ValidationLoopOptions& options,
                                         const std::vector<ExtraPlan>& extra = {});

}  // namespace kvplan::search
