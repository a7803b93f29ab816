#include "search/layer_sides.h"

#include <gtest/gtest.h>

namespace kvplan::search {
namespace {

// Every key x value of three formats; a pair's quantities are its key's plus its value's, with
// per-layer key and value errors that share nothing.
std::vector<LayerCandidates> additive_layers() {
  const char* formats[] = {"q8_0", "q4_0", "iq4_nl"};
  const double key_error[] = {0.01, 0.5, 0.4}, value_error[] = {0.002, 0.07, 0.09};
  const double bytes[] = {34, 18, 18};
  std::vector<LayerCandidates> layers;
  for (int l = 0; l < 2; ++l) {
    LayerCandidates lc{l, {}};
    for (int k = 0; k < 3; ++k) {
      for (int v = 0; v < 3; ++v) {
        const KvPair p{Format::parse(formats[k]), Format::parse(formats[v])};
        lc.candidates.push_back(
            {p, (8.5 * (k == 0) + 4.5 * (k != 0) + 8.5 * (v == 0) + 4.5 * (v != 0)) / 2,
             bytes[k] + bytes[v], (l + 1) * key_error[k] + value_error[v]});
      }
    }
    layers.push_back(std::move(lc));
  }
  return layers;
}

TEST(LayerSides, AKeyShareAndAValueShareAddUpToEveryPair) {
  const auto layers = additive_layers();
  const auto sides = split_sides(layers);
  ASSERT_TRUE(sides.has_value());
  ASSERT_EQ(sides->size(), 2u);
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerSides& s = (*sides)[l];
    ASSERT_EQ(s.keys.size(), 3u);
    ASSERT_EQ(s.values.size(), 3u);
    for (const LayerCandidate& c : layers[l].candidates) {
      const auto key = std::find_if(s.keys.begin(), s.keys.end(),
                                    [&](const SideCandidate& o) { return o.format == c.pair.key; });
      const auto value =
          std::find_if(s.values.begin(), s.values.end(),
                       [&](const SideCandidate& o) { return o.format == c.pair.value; });
      ASSERT_NE(key, s.keys.end());
      ASSERT_NE(value, s.values.end());
      EXPECT_NEAR(key->error + value->error, c.error, 1e-15) << c.pair.name();
      EXPECT_DOUBLE_EQ(key->bytes_per_token + value->bytes_per_token, c.bytes_per_token);
      EXPECT_DOUBLE_EQ(key->bits + value->bits, c.bits);
      EXPECT_GE(key->error, 0);
      EXPECT_GE(value->error, 0);
      EXPECT_GE(value->bytes_per_token, 0);
    }
    // The value share is what a value adds beyond the least value: q8_0 keys' bytes are 34 + 18.
    EXPECT_DOUBLE_EQ(s.keys[0].bytes_per_token, 34 + 18);
    EXPECT_DOUBLE_EQ(s.values[0].bytes_per_token, 34 - 18);
    EXPECT_DOUBLE_EQ(s.values[1].bytes_per_token, 0);
    // Key errors keep their differences: q4_0 costs (l + 1) * 0.49 more than q8_0.
    EXPECT_NEAR(s.keys[1].error - s.keys[0].error, (l + 1) * 0.49, 1e-12);
  }
}

TEST(LayerSides, JointPairsOrAnIncompleteProductCannotBeSplit) {
  auto interacting = additive_layers();
  interacting[1].candidates[4].error += 1e-3;  // q4_0/q4_0 worse than its sides
  EXPECT_FALSE(split_sides(interacting).has_value());

  auto missing = additive_layers();
  missing[0].candidates.pop_back();  // no iq4_nl/iq4_nl
  EXPECT_FALSE(split_sides(missing).has_value());

  auto twice = additive_layers();
  twice[0].candidates[8] = twice[0].candidates[0];  // q8_0/q8_0 twice, iq4_nl/iq4_nl never
  EXPECT_FALSE(split_sides(twice).has_value());

  EXPECT_FALSE(split_sides({{0, {}}}).has_value());
}

}  // namespace
}  // namespace kvplan::search
