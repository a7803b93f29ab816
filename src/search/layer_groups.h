// Inter-layer clustering (KVTuner §4.3): layers whose pruned candidate sets are identical form a
// partition; within a partition, DBSCAN on the layers' sensitivity vectors merges alike layers
// into one group that the search assigns a single pair. Noise layers become groups of their own.
//
//   std::vector<LayerGroup> groups = group_layers(pruned, {.eps = 0.05, .min_samples = 2});
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "search/candidates.h"
#include "search/dbscan.h"

namespace kvplan::search {

// What a group's choice sets on its layers: the whole pair, or one side of it when keys and values
// are grouped apart (ik_llama.cpp's first/last-N types, which K and V take independently).
enum class GroupSide { kPair, kKeys, kValues };

// The format a group of one side (kKeys, kValues) sets from a pair: its key or its value.
inline const Format& format_on_side(const KvPair& pair, GroupSide side) {
  return side == GroupSide::kKeys ? pair.key : pair.value;
}
// "keys", "values", or "" for kPair: the plan's provenance and the logs.
inline const char* side_name(GroupSide side) {
  return side == GroupSide::kKeys ? "keys" : side == GroupSide::kValues ? "values" : "";
}

struct LayerGroup {
  std::vector<int> layers;      // ascending
  std::vector<KvPair> choices;  // the candidate pairs every layer of the group has; for a side
                                // group, KvPair::uniform of each format the side may take
  GroupSide side = GroupSide::kPair;
};

// The index of the choice of `group` that gives `pair` (of a side group: that side of `pair`).
std::optional<size_t> choice_for(const LayerGroup& group, const KvPair& pair);

// `pruned[l].candidates` must be each layer's Pareto set; layers are `pruned[l].layer`. Groups are
// ordered by their first layer. Deterministic for a given input.
std::vector<LayerGroup> group_layers(const std::vector<LayerCandidates>& pruned,
                                     const DbscanOptions& options);

// "g0: layers 0-3 [KV8 K8V4 KV4]" lines for logs and reports ("g1: keys of layers 0 1 [q8_0
// q4_0]").
std::string describe_groups(const std::vector<LayerGroup>& groups);

}  // namespace kvplan::search
