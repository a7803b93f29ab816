// NSGA-II over the layer groups (Deb et al., IEEE TEC 2002, via pagmo2's pagmo::nsga2), run on an
// archipelago of independent islands (no migration, one seed each) so that the result depends only
// on the options, never on thread timing.
//
//   Nsga2Options opt;  opt.seed = 7;
//   std::vector<Assignment> front = nsga2_front(space, opt);  // feasible, non-dominated, by memory
#pragma once

#include <vector>

#include "search/kv_search_problem.h"

namespace kvplan::search {

struct Nsga2Options {
  unsigned population = 64;  // per island; pagmo's NSGA-II needs >= 5 and a multiple of 4
  unsigned generations = 200;
  unsigned seed = 42;
  unsigned islands = 2;     // evolved in parallel threads; the result does not depend on cores
  double crossover = 0.95;  // pagmo defaults: cr, eta_c, m (mutation probability), eta_m
  double eta_c = 10.0;
  double mutation = 0.01;
  double eta_m = 50.0;

  // Throws Error(kInvalidArgument) naming the option, the allowed range and the value.
  void validate() const;
};

struct SearchResult {
  std::vector<Assignment> front;  // feasible, non-dominated, distinct, sorted by memory
  unsigned evaluations = 0;       // fitness evaluations spent
};

// `seeds` (e.g. the exact front of the additive surrogate) start in every island's population:
// up to half of it, evenly spaced along the list; the uniform configurations take up to a
// quarter; the rest is random.
SearchResult nsga2_front(const SearchSpace& space, const Nsga2Options& options,
                         const std::vector<std::vector<int>>& seeds = {});

// The feasible non-dominated subset of `points`, distinct by choice, sorted by memory then error.
std::vector<Assignment> non_dominated(std::vector<Assignment> points);

}  // namespace kvplan::search
