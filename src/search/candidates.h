// What the search works on: for every layer, the (key, value) pairs it may take, each with its
// memory and its measured sensitivity (LayerCandidates, profile/pair_view.h), and the memory
// measure its budget is in; kept free of file formats so the search can be tested on its own.
#pragma once

#include <vector>

#include "formats/budget.h"
#include "formats/kv_pair.h"
#include "profile/pair_view.h"

namespace kvplan::search {

inline double memory_of(const LayerCandidate& c, MemoryMeasure m) {
  return m == MemoryMeasure::kBits ? c.bits : c.bytes_per_token;
}

// One side (keys or values) of a layer's pairs in one format: its share of a pair's bits, bytes
// and error, a pair's being its key's plus its value's (src/search/layer_sides.h).
struct SideCandidate {
  Format format;
  double bits = 0;
  double bytes_per_token = 0;
  double error = 0;
};

struct LayerSides {
  std::vector<SideCandidate> keys;
  std::vector<SideCandidate> values;
};

inline double memory_of(const SideCandidate& c, MemoryMeasure m) {
  return m == MemoryMeasure::kBits ? c.bits : c.bytes_per_token;
}

}  // namespace kvplan::search
