#include "search/kv_search_problem.h"

#include <algorithm>

#include <cmath>
#include <map>

#include "core/error.h"

namespace kvplan::search {
namespace {

// Larger than any memory or error a real model produces; keeps infeasible points behind.
constexpr double kInfeasiblePenalty = 1e12;

size_t find_candidate(const LayerCandidates& layer, const KvPair& pair) {
  for (size_t c = 0; c < layer.candidates.size(); ++c) {
    if (layer.candidates[c].pair == pair) return c;
  }
  fail(ErrorCode::kInvalidArgument, "layer {} has no candidate {}", layer.layer, pair.name());
}

size_t find_side(const std::vector<SideCandidate>& side, const Format& format, int layer,
                 const char* what) {
  for (size_t c = 0; c < side.size(); ++c) {
    if (side[c].format == format) return c;
  }
  fail(ErrorCode::kInvalidArgument, "layer {} has no {} format {}", layer, what, format.name());
}

void check_choice(const SearchSpace& space, const std::vector<int>& choice) {
  if (choice.size() != space.groups.size()) {
    fail(ErrorCode::kInvalidArgument, "{} choices for {} groups", choice.size(),
         space.groups.size());
  }
  for (size_t g = 0; g < choice.size(); ++g) {
    if (choice[g] < 0 || static_cast<size_t>(choice[g]) >= space.groups[g].choices.size()) {
      fail(ErrorCode::kInvalidArgument, "group {}: choice {} out of range 0..{}", g, choice[g],
           space.groups[g].choices.size() - 1);
    }
  }
}

}  // namespace

double summed_budget(const SearchSpace& space) {
  return space.measure == MemoryMeasure::kBits
             ? space.budget * static_cast<double>(space.layers.size())
             : space.budget;
}

SearchTable SearchTable::build(const SearchSpace& space) {
  std::map<int, size_t> entry_of_layer;
  for (size_t i = 0; i < space.layers.size(); ++i) entry_of_layer[space.layers[i].layer] = i;
  SearchTable t;
  t.cost.resize(space.groups.size());
  t.members.resize(space.groups.size());
  for (size_t g = 0; g < space.groups.size(); ++g) {
    const LayerGroup& group = space.groups[g];
    if (group.side != GroupSide::kPair && space.sides.size() != space.layers.size()) {
      fail(ErrorCode::kInvalidArgument, "group {} holds one side but the space has no sides", g);
    }
    for (const KvPair& pair : group.choices) {
      GroupChoiceCost cost;
      const auto add = [&](size_t i, size_t c, double memory, double error) {
        const double w = space.layer_weights.empty() ? 1.0 : space.layer_weights[i];
        cost.memory += memory;
        cost.weighted_error += w * error;
        cost.error += error;
        t.members[g].emplace_back(i, c);
      };
      for (const int layer : group.layers) {
        const size_t i = entry_of_layer.at(layer);
        if (group.side == GroupSide::kPair) {
          const size_t c = find_candidate(space.layers[i], pair);
          const LayerCandidate& cand = space.layers[i].candidates[c];
          add(i, c, memory_of(cand, space.measure), cand.error);
        } else {
          const bool keys = group.side == GroupSide::kKeys;
          const std::vector<SideCandidate>& side =
              keys ? space.sides[i].keys : space.sides[i].values;
          const size_t c =
              find_side(side, format_on_side(pair, group.side), layer, keys ? "key" : "value");
          add(i, c, memory_of(side[c], space.measure), side[c].error);
        }
      }
      t.cost[g].push_back(cost);
    }
  }
  return t;
}

std::pair<double, double> assignment_objectives(const SearchSpace& space, const SearchTable& table,
                                                const std::vector<int>& choice) {
  double memory = 0, weighted = 0, raw = 0;
  for (size_t g = 0; g < choice.size(); ++g) {
    const GroupChoiceCost& c = table.cost[g][static_cast<size_t>(choice[g])];
    memory += c.memory;
    weighted += c.weighted_error;
    raw += c.error;
  }
  if (space.measure == MemoryMeasure::kBits && !space.layers.empty()) {
    memory /= static_cast<double>(space.layers.size());
  }
  return {memory, weighted + space.interaction * raw * raw};
}

Assignment evaluate_assignment(const SearchSpace& space, const SearchTable& table,
                               const std::vector<int>& choice) {
  check_choice(space, choice);
  Assignment a;
  a.choice = choice;
  a.pairs.resize(space.layers.size());
  // Which of each entry's key and value the groups have set: a pair group sets both.
  constexpr unsigned kKeySet = 1, kValueSet = 2;
  std::vector<unsigned> set(space.layers.size(), 0);
  for (size_t g = 0; g < space.groups.size(); ++g) {
    const LayerGroup& group = space.groups[g];
    const size_t n_layers = group.layers.size();
    const size_t c = static_cast<size_t>(choice[g]);
    for (size_t k = 0; k < n_layers; ++k) {
      const auto [entry, cand] = table.members[g][c * n_layers + k];
      switch (group.side) {
        case GroupSide::kPair:
          a.pairs[entry] = space.layers[entry].candidates[cand].pair;
          set[entry] |= kKeySet | kValueSet;
          break;
        case GroupSide::kKeys:
          a.pairs[entry].key = group.choices[c].key;
          set[entry] |= kKeySet;
          break;
        case GroupSide::kValues:
          a.pairs[entry].value = group.choices[c].value;
          set[entry] |= kValueSet;
          break;
      }
    }
  }
  for (size_t i = 0; i < set.size(); ++i) {
    if (set[i] != (kKeySet | kValueSet)) {
      fail(ErrorCode::kInternal, "the search groups leave the {} of layer {} unset",
           (set[i] & kKeySet) ? "value" : "key", space.layers[i].layer);
    }
  }
  const auto [memory, error] = assignment_objectives(space, table, choice);
  a.memory = memory;
  a.predicted_error = error;
  a.feasible = within_budget(memory, space.budget);
  return a;
}

Assignment evaluate_assignment(const SearchSpace& space, const std::vector<int>& choice) {
  check_choice(space, choice);
  return evaluate_assignment(space, SearchTable::build(space), choice);
}

std::vector<int> choices_from_decision_vector(const SearchSpace& space,
                                              const pagmo::vector_double& x) {
  std::vector<int> choice;
  choice.reserve(x.size());
  for (size_t g = 0; g < x.size(); ++g) {
    const int last = static_cast<int>(space.groups[g].choices.size()) - 1;
    choice.push_back(std::min(static_cast<int>(std::lround(x[g])), last));
  }
  return choice;
}

pagmo::vector_double KvSearchProblem::fitness(const pagmo::vector_double& x) const {
  const auto [memory, error] =
      assignment_objectives(*space_, *table_, choices_from_decision_vector(*space_, x));
  if (within_budget(memory, space_->budget)) return {memory, error};
  const double excess = memory - space_->budget;
  return {kInfeasiblePenalty + excess, kInfeasiblePenalty + excess};
}

std::pair<pagmo::vector_double, pagmo::vector_double> KvSearchProblem::get_bounds() const {
  pagmo::vector_double lo(space_->groups.size(), 0.0), hi(space_->groups.size(), 0.0);
  for (size_t g = 0; g < space_->groups.size(); ++g) {
    // NSGA-II refuses a gene whose bounds are equal: a group with one choice (a layer the engine
    // fixes) gets two values that both mean it.
    hi[g] = static_cast<double>(std::max<size_t>(space_->groups[g].choices.size() - 1, 1));
  }
  return {lo, hi};
}

}  // namespace kvplan::search
