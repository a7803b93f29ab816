#include "search/kv_search_problem.h"

#include <cmath>
#include <map>

#include "core/error.h"

namespace kvplan::search {
namespace {

// Larger than any memory or error a real model produces; keeps infeasible points behind.
constexpr double kInfeasiblePenalty = 1e12;

const LayerCandidate& find_candidate(const LayerCandidates& layer, const KvPair& pair) {
  for (const LayerCandidate& c : layer.candidates) {
    if (c.pair == pair) return c;
  }
  fail(ErrorCode::kInvalidArgument, "layer {} has no candidate {}", layer.layer, pair.name());
}

}  // namespace

Assignment evaluate_assignment(const SearchSpace& space, const std::vector<int>& choice) {
  if (choice.size() != space.groups.size()) {
    fail(ErrorCode::kInvalidArgument, "{} choices for {} groups", choice.size(),
         space.groups.size());
  }
  std::map<int, size_t> entry_of_layer;
  for (size_t i = 0; i < space.layers.size(); ++i) entry_of_layer[space.layers[i].layer] = i;

  Assignment a;
  a.choice = choice;
  a.pairs.resize(space.layers.size());
  double memory = 0, error = 0;
  for (size_t g = 0; g < space.groups.size(); ++g) {
    const LayerGroup& group = space.groups[g];
    if (choice[g] < 0 || static_cast<size_t>(choice[g]) >= group.choices.size()) {
      fail(ErrorCode::kInvalidArgument, "group {}: choice {} out of range 0..{}", g, choice[g],
           group.choices.size() - 1);
    }
    const KvPair& pair = group.choices[static_cast<size_t>(choice[g])];
    for (int layer : group.layers) {
      const size_t i = entry_of_layer.at(layer);
      const LayerCandidate& c = find_candidate(space.layers[i], pair);
      const double w = space.layer_weights.empty() ? 1.0 : space.layer_weights[i];
      memory += memory_of(c, space.measure);
      error += w * c.error;
      a.pairs[i] = pair;
    }
  }
  if (space.measure == MemoryMeasure::kBits && !space.layers.empty()) {
    memory /= static_cast<double>(space.layers.size());
  }
  a.memory = memory;
  a.predicted_error = error;
  a.feasible = memory <= space.budget * (1 + 1e-12);
  return a;
}

std::vector<int> choices_from_decision_vector(const pagmo::vector_double& x) {
  std::vector<int> choice;
  choice.reserve(x.size());
  for (double v : x) choice.push_back(static_cast<int>(std::lround(v)));
  return choice;
}

pagmo::vector_double KvSearchProblem::fitness(const pagmo::vector_double& x) const {
  const Assignment a = evaluate_assignment(*space_, choices_from_decision_vector(x));
  if (a.feasible) return {a.memory, a.predicted_error};
  const double excess = a.memory - space_->budget;
  return {kInfeasiblePenalty + excess, kInfeasiblePenalty + excess};
}

std::pair<pagmo::vector_double, pagmo::vector_double> KvSearchProblem::get_bounds() const {
  pagmo::vector_double lo(space_->groups.size(), 0.0), hi(space_->groups.size(), 0.0);
  for (size_t g = 0; g < space_->groups.size(); ++g) {
    hi[g] = static_cast<double>(space_->groups[g].choices.size() - 1);
  }
  return {lo, hi};
}

}  // namespace kvplan::search
