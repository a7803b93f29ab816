// The side-candidate catalogue, the smallest plan it allows, and the dKL estimate and additivity
// check on hand-built profiles whose answers are worked out here.
#include "profile/side_candidates.h"

#include <gtest/gtest.h>

#include "profile/pair_view.h"

#include "core/error.h"
#include "profile/dkl_estimate.h"

namespace kvplan {
namespace {

ModelConfig config(int layers, int kv_heads, int head_dim) {
  ModelConfig c;
  c.n_layers = layers;
  c.n_heads = kv_heads * 3;
  c.n_kv_heads.assign(static_cast<size_t>(layers), kv_heads);
  c.head_dim = head_dim;
  c.sliding_window.assign(static_cast<size_t>(layers), 0);
  return c;
}

TEST(SideCandidates, WholeCatalogueForKeysAndValuesWithAnchors) {
  const SideCandidates s = catalog_side_candidates(config(2, 3, 64), {}, {});
  // Every format but f32 is in the default catalogue: 31 per side survive at head_dim 64 (g128
  // packs like g64 on 64-value rows, the *_had64 forms like the *_had ones), the three KIVI
  // formats for keys only, + joint.
  ASSERT_EQ(s.candidates.size(), 34u + 31u + 1u);
  EXPECT_EQ(s.skipped.size(), 6u + 3u + 6u);
  EXPECT_EQ(candidate_side(s.candidates.front()), CandidateSide::kKeyOnly);
  EXPECT_EQ(candidate_side(s.candidates[33]), CandidateSide::kKeyOnly);
  EXPECT_EQ(s.candidates[8], KvPair::parse("int8_kivi/f32"));             // after f16 .. int2_g64
  EXPECT_EQ(s.candidates[33], KvPair::parse("int8_per_token_head/f32"));  // the last format id
  EXPECT_EQ(candidate_side(s.candidates[34]), CandidateSide::kValueOnly);
  EXPECT_EQ(s.candidates.back(), KvPair::parse("q4_0/q4_0"));
  int measured = 0;
  for (size_t i = 0; i < s.candidates.size(); ++i) {
    if (!s.dkl_measured[i]) continue;
    ++measured;
    EXPECT_TRUE(side_format(s.candidates[i]) == Format::parse("q4_0")) << s.candidates[i].name();
  }
  EXPECT_EQ(measured, 3);
  // All re-run on request.
  const SideCandidates all =
      catalog_side_candidates(config(2, 3, 64), {}, {.formats = {}, .all_dkl = true});
  for (const bool m : all.dkl_measured) EXPECT_TRUE(m);
}

TEST(SideCandidates, RotationsOfTheSameSpanAreOneCandidate) {
  // At head_dim 64 one span of 64 is the row: q4_0_had64 packs q4_0_had's bytes and is left out
  // (the first in catalogue order stays); at 128 they differ and both are searched.
  const std::vector<Format> formats{Format::parse("q4_0_had"), Format::parse("q4_0_had64"),
                                    Format::parse("q8_0_had64")};
  const SideCandidates narrow = catalog_side_candidates(config(2, 3, 64), {}, {.formats = formats});
  ASSERT_EQ(narrow.skipped.size(), 2u);  // keys and values
  EXPECT_EQ(
      narrow.skipped[0],
      "q4_0_had64 for keys: packs exactly like q4_0_had (rotated spans of 64 values per row)");
  EXPECT_EQ(narrow.candidates.size(), 2u + 2u + 1u);
  const SideCandidates wide = catalog_side_candidates(config(2, 3, 128), {}, {.formats = formats});
  EXPECT_TRUE(wide.skipped.empty());
  EXPECT_EQ(wide.candidates.size(), 3u + 3u + 1u);
}

TEST(SideCandidates, SmallestPlanFromFormatSizes) {
  const ModelConfig c = config(2, 3, 64);
  const SideCandidates s = catalog_side_candidates(c, {}, {});
  // int2_g64 on both sides: 64 values -> 4 B scale+zero + 16 B codes = 20 B per row; 2 layers x
  // 3 heads x (K + V).
  EXPECT_DOUBLE_EQ(smallest_plan_bytes(c, {}, s.candidates), 2 * 3 * 2 * 20.0);
  // Joint pairs only: the cheapest pair as it is.
  EXPECT_DOUBLE_EQ(smallest_plan_bytes(c, {}, {KvPair::parse("q8_0/q4_0"), KvPair::parse("KV8")}),
                   2 * 3 * (68.0 + 36.0));
  EXPECT_THROW((void)catalog_side_candidates(c, {}, {.formats = {Format::parse("f32")}}), Error);
}

// A profile with one layer: int4 key anchor measured, int2 key estimated; value anchor measured;
// joint int4/int4 measured.
Profile hand_profile() {
  Profile p;
  p.model.geometry = KvGeometry::uniform("m", 1, 1, 8);
  const Format exact(FormatId::kF32), i4 = Format::parse("int4"), i2 = Format::parse("int2");
  p.candidates = {{i4, exact}, {i2, exact}, {exact, i4}, {i4, i4}};
  p.dkl_measured = {true, false, true, true};
  p.reset_cells();
  const auto cell = [&](size_t c, double dkl, double o_mse, bool measured) {
    ProfileCell x;
    x.pair = p.candidates[c];
    x.metrics.dkl = dkl;
    x.metrics.o_mse = o_mse;
    x.metrics.dkl_measured = measured;
    p.cells[0][c] = x;
  };
  cell(0, 0.02, 0.5, true);  // key alpha = 0.04
  cell(1, 0.0, 3.0, false);  // estimated: 0.04 * 3 = 0.12
  cell(2, 0.005, 0.25, true);
  cell(3, 0.03, 0.7, true);  // sides sum to 0.025: 1/6 off
  return p;
}

TEST(DklEstimate, ScalesTheSideAnchorByOutputError) {
  Profile p = hand_profile();
  estimate_unmeasured_dkl(p);
  EXPECT_NEAR(p.cell(0, 1)->metrics.dkl, 0.12, 1e-15);
  EXPECT_EQ(p.cell(0, 0)->metrics.dkl, 0.02);  // measured cells are kept
  estimate_unmeasured_dkl(p);                  // idempotent
  EXPECT_NEAR(p.cell(0, 1)->metrics.dkl, 0.12, 1e-15);
  const ModelCheck a = additivity_check(p);
  EXPECT_EQ(a.cells, 1);
  EXPECT_NEAR(a.mean_abs_rel_error, (0.03 - 0.025) / 0.03, 1e-12);
  EXPECT_EQ(a.worst_layer, 0);
  EXPECT_EQ(a.worst_pair, "KV4");
}

// Per KV head, a layer's side cells are shared by each head's part of o_mse, and its bytes split
// evenly over its heads.
TEST(PairView, PerHeadEntriesApportionTheLayersDklByOutputErrorShares) {
  Profile p;
  p.model.geometry = KvGeometry::uniform("m", 1, 2, 8);
  const Format exact(FormatId::kF32), i4 = Format::parse("int4");
  p.candidates = {{i4, exact}, {exact, i4}};
  p.reset_cells();
  const auto cell = [&](size_t c, double dkl, double o_mse, std::vector<double> heads) {
    ProfileCell x;
    x.pair = p.candidates[c];
    x.key_bytes_per_token = c == 0 ? 24 : 0;
    x.value_bytes_per_token = c == 1 ? 24 : 0;
    x.metrics.dkl = dkl;
    x.metrics.o_mse = o_mse;
    x.metrics.o_mse_heads = std::move(heads);
    p.cells[0][c] = x;
  };
  cell(0, 0.02, 0.5, {0.4, 0.1});
  cell(1, 0.005, 0.25, {0.05, 0.2});
  const std::vector<LayerCandidates> layers = candidates_from_profile(p, SensitivityMetric::kDkl);
  ASSERT_EQ(layers.size(), 1u);
  const std::vector<LayerCandidates> heads =
      candidates_from_profile(p, SensitivityMetric::kDkl, KvGranularity::kHead);
  ASSERT_EQ(heads.size(), 2u);
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(heads[h].layer, h);  // the entry's number
    EXPECT_EQ(heads[h].layer_of_model(), 0);
    EXPECT_EQ(heads[h].head, h);
  }
  const auto i4i4 = [](const LayerCandidates& e) {
    for (const LayerCandidate& c : e.candidates) {
      if (c.pair == KvPair::parse("int4/int4")) return c;
    }
    ADD_FAILURE() << "no int4/int4";
    return LayerCandidate{};
  };
  EXPECT_NEAR(i4i4(heads[0]).error, 0.02 * 0.8 + 0.005 * 0.2, 1e-15);
  EXPECT_NEAR(i4i4(heads[1]).error, 0.02 * 0.2 + 0.005 * 0.8, 1e-15);
  // The heads' shares add up to the layer's pair, bytes too.
  EXPECT_NEAR(i4i4(heads[0]).error + i4i4(heads[1]).error, i4i4(layers[0]).error, 1e-15);
  EXPECT_DOUBLE_EQ(i4i4(heads[0]).bytes_per_token, i4i4(layers[0]).bytes_per_token / 2);
  EXPECT_DOUBLE_EQ(i4i4(heads[0]).bits, i4i4(layers[0]).bits);
  EXPECT_THROW((void)candidates_from_profile(p, SensitivityMetric::kEo, KvGranularity::kHead),
               Error);
  // Measured (or fitted) per-head dKL takes the place of the shares.
  p.cells[0][0]->metrics.dkl_heads = {0.015, 0.005};
  p.cells[0][1]->metrics.dkl_heads = {0.004, 0.001};
  const std::vector<LayerCandidates> measured =
      candidates_from_profile(p, SensitivityMetric::kDkl, KvGranularity::kHead);
  EXPECT_DOUBLE_EQ(i4i4(measured[0]).error, 0.015 + 0.004);
  EXPECT_DOUBLE_EQ(i4i4(measured[1]).error, 0.005 + 0.001);
  p.cells[0][0]->metrics.dkl_heads.clear();
  p.cells[0][1]->metrics.dkl_heads.clear();
  p.cells[0][1]->metrics.o_mse_heads.clear();  // a profile from before per-head o_mse
  try {
    (void)candidates_from_profile(p, SensitivityMetric::kDkl, KvGranularity::kHead);
    ADD_FAILURE() << "a profile without per-head o_mse";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("o_mse_heads"), std::string::npos) << e.what();
  }
}

// Per KV head, each head's alpha comes from the anchors' one-head re-runs.
TEST(DklEstimate, FitsEachKvHeadsAlphaOnItsOwnAnchorRuns) {
  Profile p;
  p.model.geometry = KvGeometry::uniform("m", 1, 2, 8);
  const Format exact(FormatId::kF32), i4 = Format::parse("int4"), i2 = Format::parse("int2");
  p.candidates = {{i4, exact}, {i2, exact}};
  p.dkl_measured = {true, false};
  p.reset_cells();
  ProfileCell anchor;
  anchor.pair = p.candidates[0];
  anchor.metrics = {
      .dkl = 0.04, .o_mse = 0.5, .o_mse_heads = {0.3, 0.2}, .dkl_heads = {0.03, 0.01}};
  p.cells[0][0] = anchor;
  ProfileCell other;
  other.pair = p.candidates[1];
  other.metrics = {.o_mse = 0.7, .o_mse_heads = {0.6, 0.1}, .dkl_measured = false};
  p.cells[0][1] = other;
  estimate_unmeasured_dkl(p);
  const std::vector<double>& heads = p.cell(0, 1)->metrics.dkl_heads;
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_NEAR(heads[0], 0.03 / 0.3 * 0.6, 1e-15);  // alpha_0 = 0.1
  EXPECT_NEAR(heads[1], 0.01 / 0.2 * 0.1, 1e-15);  // alpha_1 = 0.05
  EXPECT_NEAR(p.cell(0, 1)->metrics.dkl, 0.04 / 0.5 * 0.7, 1e-15);
  EXPECT_EQ(p.cell(0, 0)->metrics.dkl_heads, (std::vector<double>{0.03, 0.01}));
}

TEST(SideCandidates, SmallestPlanCountsTheLayersTokenShares) {
  ModelConfig c;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = {2, 2};
  c.head_dim = 64;
  c.sliding_window = {512, 0};
  const std::vector<KvPair> candidates = {KvPair::parse("KV16"), KvPair::parse("KV8")};
  const double full = smallest_plan_bytes(c, QuantSettings{}, candidates);
  const double shared = smallest_plan_bytes(c, QuantSettings{}, candidates, {0.25, 1.0});
  // Each layer's smallest is KV8 (the same bytes per layer): the first counts a quarter.
  EXPECT_DOUBLE_EQ(shared, full / 2 * 0.25 + full / 2);
}

}  // namespace
}  // namespace kvplan
