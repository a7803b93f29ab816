// Intra-layer pruning (KVTuner §4.2): keep only the candidates of a layer that no other candidate
// beats on both memory and error.
//
//   std::vector<LayerCandidate> kept = pareto_front(layer.candidates, MemoryMeasure::kBits);
#pragma once

#include <span>
#include <vector>

#include "search/candidates.h"

namespace kvplan::search {

// The non-dominated candidates (minimising memory and error), sorted by memory ascending, then by
// error. A candidate equal to a kept one on both objectives is dropped (the first one is kept), so
// the result is deterministic for a given input order.
std::vector<LayerCandidate> pareto_front(std::span<const LayerCandidate> candidates,
                                         MemoryMeasure measure);

}  // namespace kvplan::search
