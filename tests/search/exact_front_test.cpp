#include "search/exact_front.h"

#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "search/nsga2_search.h"
#include "search/pareto.h"
#include "search/validation_loop.h"
#include "search_fixtures.h"

namespace kvplan::search {
namespace {

// Random additive problems: per layer, `n_choices` candidates with random integer bytes and
// errors that fall as bytes rise (as real formats do), plus random noise so fronts are irregular.
SearchSpace random_space(int n_layers, int n_choices, uint32_t seed, double budget_fraction) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> bytes(4, 64);
  std::uniform_real_distribution<double> scale(0.1, 3.0), noise(0.5, 1.5);
  SearchSpace s;
  // Distinct pairs per layer (the search keys a layer's choices by pair).
  const auto infos = format_table();
  double max_total = 0, min_total = 0;
  for (int l = 0; l < n_layers; ++l) {
    LayerCandidates lc{l, {}};
    const double sc = scale(rng);
    double lo = 1e9, hi = 0;
    for (int c = 0; c < n_choices; ++c) {
      const double b = 6.0 * bytes(rng);
      const KvPair pair{Format(FormatId::kF16), Format(infos[static_cast<size_t>(c)].id)};
      lc.candidates.push_back({pair, 0, b, sc * noise(rng) * 64.0 / b});
      lo = std::min(lo, b);
      hi = std::max(hi, b);
    }
    max_total += hi;
    min_total += lo;
    s.layers.push_back({l, pareto_front(lc.candidates, MemoryMeasure::kBytes)});
  }
  for (const LayerCandidates& l : s.layers) {
    LayerGroup g{{l.layer}, {}};
    for (const LayerCandidate& c : l.candidates) g.choices.push_back(c.pair);
    s.groups.push_back(g);
  }
  s.measure = MemoryMeasure::kBytes;
  s.budget = min_total + budget_fraction * (max_total - min_total);
  return s;
}

std::vector<Assignment> exhaustive_front(const SearchSpace& s) {
  const SearchTable t = SearchTable::build(s);
  std::vector<Assignment> all;
  std::vector<int> choice(s.groups.size(), 0);
  while (true) {
    all.push_back(evaluate_assignment(s, t, choice));
    size_t g = 0;
    while (g < choice.size() && ++choice[g] == static_cast<int>(s.groups[g].choices.size())) {
      choice[g++] = 0;
    }
    if (g == choice.size()) break;
  }
  return non_dominated(std::move(all));
}

// Fraction of `truth` for which `found` has a point with no more memory and at most 0.5 % more
// error.
double coverage(const std::vector<Assignment>& truth, const std::vector<Assignment>& found) {
  size_t n = 0;
  for (const Assignment& t : truth) {
    for (const Assignment& a : found) {
      if (a.memory <= t.memory * (1 + 1e-12) && a.predicted_error <= t.predicted_error * 1.005) {
        ++n;
        break;
      }
    }
  }
  return truth.empty() ? 1.0 : static_cast<double>(n) / static_cast<double>(truth.size());
}

TEST(ExactFront, EqualsTheExhaustiveFrontOfSmallSpaces) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const SearchSpace s = random_space(5, 6, seed, 0.6);
    const auto truth = exhaustive_front(s);
    const ExactFront f = exact_front(s, SearchTable::build(s));
    ASSERT_EQ(f.points.size(), truth.size()) << "seed " << seed;
    for (size_t i = 0; i < truth.size(); ++i) {
      EXPECT_DOUBLE_EQ(f.points[i].memory, truth[i].memory);
      EXPECT_NEAR(f.points[i].predicted_error, truth[i].predicted_error, 1e-12);
      EXPECT_LE(f.points[i].memory, s.budget);
    }
    // Bytes are multiples of 6 here: the DP found that unit.
    EXPECT_DOUBLE_EQ(std::fmod(f.unit, 6.0), 0.0);
  }
}

TEST(ExactFront, HandlesGroupsWeightsAndFractionalBits) {
  // KVTuner's nine int pairs with nominal bits (halves: K8V4 = 6, K4V2 = 3), two layers per group
  // and unequal weights.
  SearchSpace s;
  for (const LayerCandidates& l : test::int_pair_layers(6, 3)) {
    s.layers.push_back({l.layer, l.candidates});
  }
  for (int g = 0; g < 3; ++g) {
    LayerGroup group{{2 * g, 2 * g + 1}, {}};
    for (const LayerCandidate& c : s.layers[0].candidates) group.choices.push_back(c.pair);
    s.groups.push_back(group);
  }
  s.measure = MemoryMeasure::kBits;
  s.budget = 5.0;
  s.layer_weights = {0.5, 2.0, 1.0, 1.5, 0.7, 3.0};
  const auto truth = exhaustive_front(s);
  const ExactFront f = exact_front(s, SearchTable::build(s));
  ASSERT_EQ(f.points.size(), truth.size());
  for (size_t i = 0; i < truth.size(); ++i) {
    EXPECT_EQ(f.points[i].choice, truth[i].choice);
  }
  EXPECT_NEAR(minimum_memory(s, SearchTable::build(s)), 2.0, 1e-12);
}

// Groups of one side: a layer's pair is its key group's key and its value group's value, and its
// cost the sum of the two sides' shares; a layer no value group covers is an internal error.
TEST(ExactFront, SideGroupsComposeEachLayersPair) {
  SearchSpace s;
  for (int l = 0; l < 2; ++l) {
    LayerCandidates lc{l, {}};
    LayerSides sides;
    for (const char* f : {"q8_0", "q4_0"}) {
      const double bits = Format::parse(f).nominal_bits(64);
      sides.keys.push_back({Format::parse(f), bits / 2, 16 * bits, (l + 1) * std::exp2(-bits)});
      sides.values.push_back({Format::parse(f), bits / 2, 16 * bits, std::exp2(-bits) / 4});
    }
    for (const SideCandidate& k : sides.keys) {
      for (const SideCandidate& v : sides.values) {
        lc.candidates.push_back({{k.format, v.format},
                                 k.bits + v.bits,
                                 k.bytes_per_token + v.bytes_per_token,
                                 k.error + v.error});
      }
    }
    s.layers.push_back(std::move(lc));
    s.sides.push_back(std::move(sides));
  }
  const auto both = std::vector<KvPair>{KvPair::parse("q8_0/q8_0"), KvPair::parse("q4_0/q4_0")};
  s.groups = {{{0, 1}, both, GroupSide::kKeys},
              {{0}, both, GroupSide::kValues},
              {{1}, both, GroupSide::kValues}};
  const Assignment a = evaluate_assignment(s, {1, 0, 1});
  EXPECT_EQ(a.pairs[0].name(), "q4_0/q8_0");
  EXPECT_EQ(a.pairs[1].name(), "q4_0/q4_0");
  EXPECT_DOUBLE_EQ(a.memory, 16 * (4 + 4 + 8 + 4.0));
  EXPECT_DOUBLE_EQ(a.predicted_error, 3.0 / 16 + std::exp2(-8) / 4 + 1.0 / 64);
  // The exact front over side groups is the exhaustive one: 2 x 2 x 2 assignments.
  const ExactFront f = exact_front(s, SearchTable::build(s));
  EXPECT_DOUBLE_EQ(f.points.front().memory, 16 * 16.0);
  EXPECT_DOUBLE_EQ(f.points.back().memory, 16 * 32.0);

  s.groups.pop_back();
  try {
    (void)evaluate_assignment(s, {0, 0});
    ADD_FAILURE() << "layer 1's value unset";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("value of layer 1 unset"), std::string::npos) << e.what();
  }
  s.sides.clear();
  EXPECT_THROW((void)SearchTable::build(s), Error);
}

TEST(ExactFront, RefusesSpacesTooFineForTheDp) {
  const SearchSpace s = random_space(4, 5, 2, 1.0);
  EXPECT_THROW(exact_front(s, SearchTable::build(s), 4), Error);
}

// NSGA-II on its own (no seeds) recovers the exact front of random additive problems: >= 99 % of
// its points within 0.5 % of their error at no more memory.
TEST(ExactFront, UnseededNsga2RecoversTheExactFrontOfRandomAdditiveProblems) {
  for (uint32_t seed = 11; seed <= 14; ++seed) {
    const SearchSpace s = random_space(6, 5, seed, 0.5);
    const ExactFront exact = exact_front(s, SearchTable::build(s));
    Nsga2Options opt;
    opt.population = 128;
    opt.generations = 300;
    opt.seed = seed;
    const SearchResult r = nsga2_front(s, opt);
    EXPECT_GE(coverage(exact.points, r.front), 0.99)
        << "seed " << seed << ": " << exact.points.size() << " exact points";
  }
}

// Seeded with the exact front on a large additive problem, NSGA-II finds nothing the exact front
// misses: every point it returns is matched or dominated by an exact point, and the merged front
// the validation loop uses is the exact front.
TEST(ExactFront, SeededNsga2FindsNothingBeyondTheExactFrontOfALargeProblem) {
  const SearchSpace s = random_space(40, 9, 21, 0.4);
  const ExactFront exact = exact_front(s, SearchTable::build(s));
  ASSERT_GT(exact.points.size(), 10u);
  std::vector<std::vector<int>> seeds;
  for (const Assignment& a : exact.points) seeds.push_back(a.choice);
  Nsga2Options opt;
  opt.generations = 50;
  const SearchResult r = nsga2_front(s, opt, seeds);
  for (const Assignment& a : r.front) {
    bool dominated_by_exact = false;
    for (const Assignment& e : exact.points) {
      dominated_by_exact =
          dominated_by_exact || (e.memory <= a.memory * (1 + 1e-12) &&
                                 e.predicted_error <= a.predicted_error * (1 + 1e-9));
    }
    EXPECT_TRUE(dominated_by_exact) << "NSGA-II found a point the exact front misses";
  }
  const std::vector<Assignment> merged = merged_front(exact, r);
  ASSERT_EQ(merged.size(), exact.points.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    EXPECT_NEAR(merged[i].predicted_error, exact.points[i].predicted_error,
                1e-9 * exact.points[i].predicted_error);
  }
}

}  // namespace
}  // namespace kvplan::search
