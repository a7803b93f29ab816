// The exact Pareto front of the additive surrogate. Choosing one pair per layer group to minimise
// sum_g weighted_error_g under a memory budget is a multiple-choice knapsack: dynamic programming
// over integer memory units gives, for every reachable total memory, the least error that reaches
// it — the whole front at once, in O(groups x states x choices).
//
// Memory is made integer exactly: the smallest unit 2^-k (k <= 6) in which every group's memory
// is whole, then divided by the GCD of all of them (e.g. SmolLM2 bytes: a unit of 6 B). Memory
// that no such unit represents is rounded up to 1/64 (never under-counted).
//
//   ExactFront f = exact_front(space, SearchTable::build(space));
//   f.points.back();  // the least-error assignment within the budget
#pragma once

#include <cstddef>
#include <vector>

#include "search/kv_search_problem.h"

namespace kvplan::search {

struct ExactFront {
  // Non-dominated in (memory, additive error), within the budget, sorted by memory. Each point's
  // predicted_error is the full objective (interaction term included) of its assignment.
  std::vector<Assignment> points;
  double unit = 1;     // memory per DP state (in the space's measure, summed over layers)
  size_t states = 0;   // DP states per group
  double seconds = 0;  // wall time of the DP
};

// Throws Error(kResourceExhausted) when the DP would need more than `max_states` states per group
// (memory too fine-grained for an exact solution).
ExactFront exact_front(const SearchSpace& space, const SearchTable& table,
                       size_t max_states = size_t{1} << 24);

// The least memory any assignment of the space can take (the budget's floor), in its measure.
double minimum_memory(const SearchSpace& space, const SearchTable& table);

}  // namespace kvplan::search
