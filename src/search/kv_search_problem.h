// The search space and the pagmo2 user-defined problem over it (KVTuner §4.4): one integer
// variable per layer group — the index of the pair the whole group takes — and two objectives to
// minimise: memory (bytes per token by default, or mean equivalent bits) and predicted error (the
// surrogate of surrogate.h: sum over layers of weight_l * sensitivity_l(pair), plus the
// interaction term). A memory budget is enforced by a penalty that makes every assignment over
// budget dominated by every assignment within it (pagmo's NSGA-II accepts no explicit
// constraints).
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
  // Per entry of `layers`, its pairs split into sides: what groups of one side (GroupSide::kKeys,
  // kValues) are costed from. Empty when every group sets whole pairs.
  std::vector<LayerSides> sides;
  MemoryMeasure measure = MemoryMeasure::kBytes;
  double budget = std::numeric_limits<double>::infinity();  // on `measure`: bytes / mean bits
  std::vector<double> layer_weights;  // surrogate weight per entry of `layers` (empty = all 1)
  double interaction = 0;             // gamma of surrogate.h (0: the additive surrogate)
};

// The budget as a sum over the space's layers: a bits budget is a mean over them.
double summed_budget(const SearchSpace& space);

// What one group contributes when it takes one of its choices, summed over its layers (for a group
// of one side, that side's share).
struct GroupChoiceCost {
  double memory = 0;          // bytes, or bits summed over the group's layers
  double weighted_error = 0;  // sum of w_l * e_l
  double error = 0;           // sum of e_l (the interaction term's input)
};

// Every group x choice cost, computed once per space so that an evaluation is one pass over the
// groups. Throws Error(kInvalidArgument) if a layer lacks one of its group's choices.
struct SearchTable {
  std::vector<std::vector<GroupChoiceCost>> cost;  // [group][choice]
  // [group] (entry, candidate)[choice]; for a group of one side, the candidate indexes that
  // side's list in SearchSpace::sides.
  std::vector<std::vector<std::pair<size_t, size_t>>> members;
  static SearchTable build(const SearchSpace& space);
};

struct Assignment {
  std::vector<int> choice;    // per group: index into groups[g].choices
  std::vector<KvPair> pairs;  // per entry of SearchSpace::layers
  double memory = 0;          // mean bits or total bytes per token
  double predicted_error = 0;
  bool feasible = true;
};

// Throws Error(kInvalidArgument) if a choice is out of range or a layer lacks the chosen pair (or
// side), and Error(kInternal) if the groups leave a layer's key or value unset.
Assignment evaluate_assignment(const SearchSpace& space, const std::vector<int>& choice);
Assignment evaluate_assignment(const SearchSpace& space, const SearchTable& table,
                               const std::vector<int>& choice);
// The two objectives only (no pairs): the fitness hot path.
std::pair<double, double> assignment_objectives(const SearchSpace& space, const SearchTable& table,
                                                const std::vector<int>& choice);

class KvSearchProblem {
 public:
  KvSearchProblem() = default;  // pagmo requires it
  explicit KvSearchProblem(std::shared_ptr<const SearchSpace> space)
      : space_(std::move(space)),
        table_(std::make_shared<const SearchTable>(SearchTable::build(*space_))) {}

  [[nodiscard]] pagmo::vector_double fitness(const pagmo::vector_double& x) const;
  [[nodiscard]] std::pair<pagmo::vector_double, pagmo::vector_double> get_bounds() const;
  [[nodiscard]] pagmo::vector_double::size_type get_nobj() const { return 2; }
  [[nodiscard]] pagmo::vector_double::size_type get_nix() const { return space_->groups.size(); }
  [[nodiscard]] std::string get_name() const { return "kvplan layer-group KV precision"; }

 private:
  std::shared_ptr<const SearchSpace> space_;
  std::shared_ptr<const SearchTable> table_;
};

// The choice per group a decision vector means (a one-choice group's two values both mean it).
std::vector<int> choices_from_decision_vector(const SearchSpace& space,
                                              const pagmo::vector_double& x);

}  // namespace kvplan::search
