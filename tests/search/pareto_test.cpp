#include "search/pareto.h"

#include <gtest/gtest.h>

#include "search_fixtures.h"

namespace kvplan::search {
namespace {

bool dominated_by_any(const LayerCandidate& c, const std::vector<LayerCandidate>& all) {
  for (const LayerCandidate& o : all) {
    if (o.bits <= c.bits && o.error <= c.error && (o.bits < c.bits || o.error < c.error))
      return true;
  }
  return false;
}

TEST(Pareto, MatchesBruteForceDominance) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const auto layers = test::int_pair_layers(1, seed, 1.0 + seed % 5);
    const auto& all = layers[0].candidates;
    const auto front = pareto_front(all, MemoryMeasure::kBits);
    size_t expected = 0;
    for (const LayerCandidate& c : all) expected += !dominated_by_any(c, all);
    // Brute force counts duplicates of equal (bits, error) points; the fixture has none.
    EXPECT_EQ(front.size(), expected) << "seed " << seed;
    for (const LayerCandidate& c : front) EXPECT_FALSE(dominated_by_any(c, all));
    for (size_t i = 1; i < front.size(); ++i) {
      EXPECT_LT(front[i - 1].bits, front[i].bits);
      EXPECT_GT(front[i - 1].error, front[i].error);
    }
  }
}

TEST(Pareto, KeySensitiveLayersDropKeyStarvedPairs) {
  // With keys far more sensitive than values, K2V8 (5 bits) loses to K8V2 (5 bits, lower error).
  const auto layers = test::int_pair_layers(1, 3, 10.0);
  const auto front = pareto_front(layers[0].candidates, MemoryMeasure::kBits);
  for (const LayerCandidate& c : front) EXPECT_NE(c.pair.name(), "K2V8");
}

TEST(Pareto, EqualPointsKeepTheFirst) {
  const std::vector<LayerCandidate> c = {{KvPair::parse("KV4"), 4, 10, 0.5},
                                         {KvPair::parse("q4_0/q4_0"), 4, 10, 0.5},
                                         {KvPair::parse("KV8"), 8, 20, 0.1}};
  const auto front = pareto_front(c, MemoryMeasure::kBytes);
  ASSERT_EQ(front.size(), 2u);
  EXPECT_EQ(front[0].pair.name(), "KV4");
  EXPECT_EQ(front[1].pair.name(), "KV8");
}

}  // namespace
}  // namespace kvplan::search
