#include "search/layer_groups.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace kvplan::search {

std::vector<LayerGroup> group_layers(const std::vector<LayerCandidates>& pruned,
                                     const DbscanOptions& options) {
  // Partition by candidate set (names in memory order make the key).
  std::map<std::vector<std::string>, std::vector<size_t>> partitions;
  for (size_t i = 0; i < pruned.size(); ++i) {
    std::vector<std::string> key;
    for (const LayerCandidate& c : pruned[i].candidates) key.push_back(c.pair.name());
    partitions[key].push_back(i);
  }
  std::vector<LayerGroup> groups;
  for (const auto& [names, members] : partitions) {
    std::vector<std::vector<double>> points;
    for (size_t i : members) {
      std::vector<double> errors;
      for (const LayerCandidate& c : pruned[i].candidates) errors.push_back(c.error);
      points.push_back(std::move(errors));
    }
    const std::vector<int> label = dbscan(points, options);
    std::map<int, LayerGroup> clusters;
    for (size_t k = 0; k < members.size(); ++k) {
      const LayerCandidates& layer = pruned[members[k]];
      // Noise points get a cluster of their own, keyed past every real cluster.
      const int key = label[k] >= 0 ? label[k] : static_cast<int>(members.size() + k);
      LayerGroup& g = clusters[key];
      if (g.choices.empty()) {
        for (const LayerCandidate& c : layer.candidates) g.choices.push_back(c.pair);
      }
      g.layers.push_back(layer.layer);
    }
    for (auto& [key, g] : clusters) groups.push_back(std::move(g));
  }
  for (LayerGroup& g : groups) std::sort(g.layers.begin(), g.layers.end());
  std::sort(groups.begin(), groups.end(), [](const LayerGroup& a, const LayerGroup& b) {
    return a.layers.front() < b.layers.front();
  });
  return groups;
}

std::optional<size_t> choice_for(const LayerGroup& group, const KvPair& pair) {
  for (size_t c = 0; c < group.choices.size(); ++c) {
    const KvPair& o = group.choices[c];
    const bool gives = group.side == GroupSide::kPair
                           ? o == pair
                           : format_on_side(o, group.side) == format_on_side(pair, group.side);
    if (gives) return c;
  }
  return std::nullopt;
}

std::string describe_groups(const std::vector<LayerGroup>& groups) {
  std::string out;
  for (size_t g = 0; g < groups.size(); ++g) {
    const GroupSide side = groups[g].side;
    out +=
        fmt::format("g{}: {}{}layers", g, side_name(side), side == GroupSide::kPair ? "" : " of ");
    for (int l : groups[g].layers) out += fmt::format(" {}", l);
    out += " [";
    for (size_t c = 0; c < groups[g].choices.size(); ++c) {
      const KvPair& p = groups[g].choices[c];
      out +=
          (c ? " " : "") + (side == GroupSide::kPair ? p.name() : format_on_side(p, side).name());
    }
    out += "]\n";
  }
  return out;
}

}  // namespace kvplan::search
