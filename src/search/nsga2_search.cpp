#include "search/nsga2_search.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <pagmo/algorithm.hpp>
#include <pagmo/algorithms/nsga2.hpp>
#include <pagmo/archipelago.hpp>
#include <pagmo/population.hpp>
#include <pagmo/problem.hpp>

#include "core/error.h"

namespace kvplan::search {

void Nsga2Options::validate() const {
  if (population < 8 || population % 4 != 0 || population > 100000) {
    fail(ErrorCode::kInvalidArgument,
         "population {}: NSGA-II needs a multiple of 4 between 8 and 100000", population);
  }
  if (generations < 1 || generations > 1000000) {
    fail(ErrorCode::kInvalidArgument, "generations {}: expected 1..1000000", generations);
  }
  if (islands < 1 || islands > 256) {
    fail(ErrorCode::kInvalidArgument, "islands {}: expected 1..256", islands);
  }
  if (!(crossover >= 0 && crossover < 1) || !(mutation >= 0 && mutation <= 1) || !(eta_c >= 1) ||
      !(eta_c <= 100) || !(eta_m >= 1) || !(eta_m <= 100)) {
    fail(ErrorCode::kInvalidArgument,
         "NSGA-II parameters out of range: crossover {} (0..1), mutation {} (0..1), eta_c {} and "
         "eta_m {} (1..100)",
         crossover, mutation, eta_c, eta_m);
  }
}

std::vector<Assignment> non_dominated(std::vector<Assignment> points) {
  std::erase_if(points, [](const Assignment& a) { return !a.feasible; });
  std::sort(points.begin(), points.end(), [](const Assignment& a, const Assignment& b) {
    if (a.memory != b.memory) return a.memory < b.memory;
    if (a.predicted_error != b.predicted_error) return a.predicted_error < b.predicted_error;
    return a.choice < b.choice;
  });
  std::vector<Assignment> front;
  for (Assignment& p : points) {
    // Sorted by memory: dominated exactly when an earlier kept point has error <= this one.
    if (!front.empty() && front.back().predicted_error <= p.predicted_error) continue;
    front.push_back(std::move(p));
  }
  return front;
}

SearchResult nsga2_front(const SearchSpace& space, const Nsga2Options& options,
                         const std::vector<std::vector<int>>& seeds) {
  options.validate();
  if (space.groups.empty())
    fail(ErrorCode::kInvalidArgument, "the search space has no layer groups");
  auto shared = std::make_shared<const SearchSpace>(space);
  const pagmo::problem problem{KvSearchProblem(shared)};
  const SearchTable table = SearchTable::build(space);

  // Every pair that all groups offer, applied uniformly, starts in the population: the front then
  // always contains (or dominates) the uniform configurations.
  std::vector<pagmo::vector_double> uniform;
  for (size_t c = 0; c < space.groups.front().choices.size(); ++c) {
    const KvPair& pair = space.groups.front().choices[c];
    pagmo::vector_double x;
    for (const LayerGroup& g : space.groups) {
      const std::optional<size_t> at = choice_for(g, pair);
      if (!at) break;
      x.push_back(static_cast<double>(*at));
    }
    if (x.size() == space.groups.size()) uniform.push_back(std::move(x));
  }

  std::vector<pagmo::vector_double> initial;
  const size_t from_seeds = std::min<size_t>(seeds.size(), options.population / 2);
  for (size_t k = 0; k < from_seeds; ++k) {
    // Evenly spaced, both ends included.
    const size_t i = from_seeds == 1 ? 0 : k * (seeds.size() - 1) / (from_seeds - 1);
    initial.emplace_back(seeds[i].begin(), seeds[i].end());
  }
  for (size_t k = 0; k < uniform.size() && k < options.population / 4; ++k) {
    initial.push_back(uniform[k]);
  }

  pagmo::archipelago archipelago;
  for (unsigned i = 0; i < options.islands; ++i) {
    const unsigned seed = options.seed + 7919u * i;
    pagmo::population pop(problem, options.population - initial.size(), seed);
    for (const pagmo::vector_double& x : initial) pop.push_back(x);
    pagmo::algorithm algorithm{pagmo::nsga2(options.generations, options.crossover, options.eta_c,
                                            options.mutation, options.eta_m, seed)};
    archipelago.push_back(std::move(algorithm), std::move(pop));
  }
  archipelago.evolve();
  archipelago.wait_check();

  SearchResult result;
  std::set<std::vector<int>> seen;
  std::vector<Assignment> points;
  for (const pagmo::island& island : archipelago) {
    const pagmo::population pop = island.get_population();
    result.evaluations += static_cast<unsigned>(pop.get_problem().get_fevals());
    for (const pagmo::vector_double& x : pop.get_x()) {
      std::vector<int> choice = choices_from_decision_vector(space, x);
      if (!seen.insert(choice).second) continue;
      points.push_back(evaluate_assignment(space, table, choice));
    }
  }
  result.front = non_dominated(std::move(points));
  return result;
}

}  // namespace kvplan::search
