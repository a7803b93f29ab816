// Inter-layer clustering (KVTuner §4.3): layers whose pruned candidate sets are identical form a
// partition; within a partition, DBSCAN on the layers' sensitivity vectors merges alike layers
// into one group that the search assigns a single pair. Noise layers become groups of their own.
//
//   std::vector<LayerGroup> groups = group_layers(pruned, {.eps = 0.05, .min_samples = 2});
#pragma once

#include <string>
#include <vector>

#include "search/candidates.h"
#include "search/dbscan.h"

namespace kvplan::search {

struct LayerGroup {
  std::vector<int> layers;      // ascending
  std::vector<KvPair> choices;  // the candidate pairs every layer of the group has
};

// `pruned[l].candidates` must be each layer's Pareto set; layers are `pruned[l].layer`. Groups are
// ordered by their first layer. Deterministic for a given input.
std::vector<LayerGroup> group_layers(const std::vector<LayerCandidates>& pruned,
                                     const DbscanOptions& options);

// "g0: layers 0-3 [KV8 K8V4 KV4]" lines for logs and reports.
std::string describe_groups(const std::vector<LayerGroup>& groups);

}  // namespace kvplan::search
