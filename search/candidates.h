// What the search works on: for every layer, the (key, value) pairs it may take, each with its
// memory and its measured sensitivity (from the profile). Produced from profile.json by the tune
// pipeline; kept free of file formats so the search can be tested on its own.
#pragma once

#include <vector>

#include "formats/kv_pair.h"

namespace kvplan::search {

struct LayerCandidate {
  KvPair pair;
  double bits = 0;             // KVTuner's equivalent bits of this layer: (k_bits + v_bits) / 2
  double bytes_per_token = 0;  // real bytes per token of this layer (all KV heads, K + V)
  double error = 0;            // sensitivity: dKL by default, e_o as an option
};

struct LayerCandidates {
  int layer = 0;
  std::vector<LayerCandidate> candidates;
};

enum class MemoryMeasure { kBits, kBytes };

inline double memory_of(const LayerCandidate& c, MemoryMeasure m) {
  return m == MemoryMeasure::kBits ? c.bits : c.bytes_per_token;
}

// One side (keys or values) of a layer's pairs in one format: its share of a pair's bits, bytes
// and error, a pair's being its key's plus its value's (search/layer_sides.h).
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
