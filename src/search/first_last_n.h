// ik_llama.cpp's layer structure: -ctk/-ctv for the middle layers, other types for the first N
// and the last M (-ctk-first/-ctk-last/-ctv-first/-ctv-last TYPE,N), with N and M set for keys and
// values apart.
//
// With the candidates split into sides (layer_sides.h), the error and memory of keys and of values
// add up independently, so each side's structures are priced alone: for every (N, M), every type
// per segment, keeping the side's Pareto envelope over all of them; the best plan within the budget
// is then the best pair of a key point and a value point whose memory fits, found exactly. The
// space returned has that key structure's groups and that value structure's groups, one side each.
//
//   std::optional<EngineSpace> s = split_first_last_n_space(stored, MemoryMeasure::kBytes, 6480);
//   s->structure;  // "keys: first 1 (layers 0), layers 1-29 alike; values: layers 0-29 alike"
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "search/engine_space.h"

namespace kvplan::search {

// "first 2 (layers 0-1), layers 2-28 alike, last 1 (layers 29)": the structure that sets apart the
// first `first` and the last `last` entries of `layers`.
std::string first_last_text(const std::vector<LayerCandidates>& layers, size_t first, size_t last);

// Every (first, last) with first + last <= n, simplest first: by first + last, then by first.
std::vector<std::pair<size_t, size_t>> first_last_structures(size_t n);

// nullopt when the candidates cannot be split into sides (a profile of joint pairs); then K and V
// share N and M (engine_space.cpp).
std::optional<EngineSpace> split_first_last_n_space(const std::vector<LayerCandidates>& stored,
                                                    MemoryMeasure measure, double budget);

}  // namespace kvplan::search
