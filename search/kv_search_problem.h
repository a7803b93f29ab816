// The search space and the pagmo2 user-defined problem over it (KVTuner §4.4): one integer
// variable per layer group — the index of the pair the whole group takes — and two objectives to
// minimise: memory (mean equivalent bits, or bytes per token) and predicted error (the additive
// surrogate: sum over layers of weight_l * sensitivity_l(pair)). A memory budget is enforced by a
// penalty that makes every assignment over budget dominated by every assignment within it
// (pagmo's NSGA-II accepts no explicit constraints).
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pagmo/types.hpp>

#include "search/candidates.h"
#include "search/layer_groups.h"

namespace kvplan::search {

struct SearchSpace {
  std::vector<LayerCandidates> layers;  // pruned candidates; layers[i].layer is the model layer
  std::vector<LayerGroup> groups;
  MemoryMeasure measure = MemoryMeasure::kBits;
  double budget = std::numeric_limits<double>::infinity();  // on `measure`: mean bits / bytes
  std::vector<double> layer_weights;  // surrogate weight per entry of `layers` (empty = all 1)
};

struct Assignment {
  std::vector<int> choice;    // per group: index into groups[g].choices
  std::vector<KvPair> pairs;  // per entry of SearchSpace::layers
  double memory = 0;          // mean bits or total bytes per token
  double predicted_error = 0;
  bool feasible = true;
};

// Throws Error(kInvalidArgument) if a choice is out of range or a layer lacks the chosen pair.
Assignment evaluate_assignment(const SearchSpace& space, const std::vector<int>& choice);

class KvSearchProblem {
 public:
  KvSearchProblem() = default;  // pagmo requires it
  explicit KvSearchProblem(std::shared_ptr<const SearchSpace> space) : space_(std::move(space)) {}

  [[nodiscard]] pagmo::vector_double fitness(const pagmo::vector_double& x) const;
  [[nodiscard]] std::pair<pagmo::vector_double, pagmo::vector_double> get_bounds() const;
  [[nodiscard]] pagmo::vector_double::size_type get_nobj() const { return 2; }
  [[nodiscard]] pagmo::vector_double::size_type get_nix() const { return space_->groups.size(); }
  [[nodiscard]] std::string get_name() const { return "kvplan layer-group KV precision"; }

 private:
  std::shared_ptr<const SearchSpace> space_;
};

std::vector<int> choices_from_decision_vector(const pagmo::vector_double& x);

}  // namespace kvplan::search
