#include "search/layer_groups.h"

#include <gtest/gtest.h>

#include "search/pareto.h"

namespace kvplan::search {
namespace {

LayerCandidates layer(int index, std::vector<std::pair<const char*, double>> errors) {
  LayerCandidates l{index, {}};
  for (auto [name, e] : errors) {
    const KvPair p = KvPair::parse(name);
    l.candidates.push_back({p, p.nominal_bits(64), 0, e});
  }
  return l;
}

TEST(LayerGroups, PartitionsBySetThenClustersBySensitivity) {
  const std::vector<LayerCandidates> pruned = {
      layer(0, {{"KV8", 0.010}, {"KV4", 0.100}}),
      layer(1, {{"KV8", 0.011}, {"KV4", 0.101}}),  // like layer 0
      layer(2, {{"KV8", 0.300}, {"KV4", 0.900}}),  // same set, far away: its own group
      layer(3, {{"KV8", 0.010}, {"K8V4", 0.05}, {"KV4", 0.100}}),  // another set
      layer(4, {{"KV8", 0.012}, {"KV4", 0.099}}),                  // like layers 0 and 1
  };
  const auto groups = group_layers(pruned, {.eps = 0.05, .min_samples = 2});
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].layers, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(groups[1].layers, (std::vector<int>{2}));
  EXPECT_EQ(groups[2].layers, (std::vector<int>{3}));
  EXPECT_EQ(groups[2].choices.size(), 3u);
  EXPECT_NE(describe_groups(groups).find("g0: layers 0 1 4 [KV8 KV4]"), std::string::npos)
      << describe_groups(groups);
}

}  // namespace
}  // namespace kvplan::search
