#include "search/pareto.h"

#include <algorithm>
#include <numeric>

namespace kvplan::search {

std::vector<LayerCandidate> pareto_front(std::span<const LayerCandidate> candidates,
                                         MemoryMeasure measure) {
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Memory ascending, then error ascending; stable so equal candidates keep input order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double ma = memory_of(candidates[a], measure), mb = memory_of(candidates[b], measure);
    if (ma != mb) return ma < mb;
    return candidates[a].error < candidates[b].error;
  });
  std::vector<LayerCandidate> front;
  for (size_t i : order) {
    // Sorted by memory, a candidate is dominated exactly when an earlier kept one has error <= it.
    if (!front.empty() && front.back().error <= candidates[i].error) continue;
    front.push_back(candidates[i]);
  }
  return front;
}

}  // namespace kvplan::search
