// A layer's pairs taken apart into keys and values, for searches whose groups hold one side
// (ik_llama.cpp takes its first/last-N types for K and V independently).
//
// It is possible when a layer's candidates are every key format x every value format and each
// pair's bits, bytes and error are its key's plus its value's: a profile of side candidates, which
// is the default (profile/pair_view.h). A key's share is the least the pair takes over the values; a
// value's, what is left beyond the least over every pair, so that every share is >= 0 and a key's
// share plus a value's is the pair's.
//
//   std::optional<std::vector<LayerSides>> s = split_sides(candidates);
//   if (s) (*s)[0].keys[1].error;  // the error layer 0's second key format adds
#pragma once

#include <optional>
#include <vector>

#include "search/candidates.h"

namespace kvplan::search {

// nullopt when some layer's candidates are not a full product of its key and value formats, or a
// pair's quantity differs from its sides' sum by more than rounding.
std::optional<std::vector<LayerSides>> split_sides(const std::vector<LayerCandidates>& layers);

}  // namespace kvplan::search
