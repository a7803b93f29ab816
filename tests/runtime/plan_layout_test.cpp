#include "runtime/plan_layout.h"

#include <cmath>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/kv_bytes.h"
#include "formats/pack.h"
#include "plan/plan_fingerprint.h"
#include "runtime_test_util.h"

namespace kvplan {
namespace {

TEST(PlanLayout, PageBytesComputedByHand) {
  const Plan plan = test::mixed_plan(2, 64, 16);
  const PlanLayout layout(plan, {.chunk_tokens = 64});
  EXPECT_EQ(layout.pages_per_chunk(), 4u);
  // bf16: 16 tokens x 2 heads x 64 values x 2 B.
  EXPECT_EQ(layout.run(0, 0).key_page_bytes, 16u * 2 * 128);
  // q4_0: 64 values = 2 blocks of 18 B.
  EXPECT_EQ(layout.run(1, 0).key_page_bytes, 16u * 2 * 36);
  // int8 group 32: 2 x (4 + 32) B; int4: 2 x (4 + 16) B.
  EXPECT_EQ(layout.run(2, 0).key_page_bytes, 16u * 2 * 72);
  EXPECT_EQ(layout.run(2, 0).value_page_bytes, 16u * 2 * 40);
}

TEST(PlanLayout, PagesPerKvHeadLayersAsTheirHeadRuns) {
  const Plan plan = test::per_head_plan();
  const PlanLayout layout(plan, {.chunk_tokens = 32});
  // Layer 1: q8_0, q4_0, q8_0 -> three runs of one head; layer 3: q4_0 x2, bf16 -> two runs.
  ASSERT_EQ(layout.layer(1).runs.size(), 3u);
  ASSERT_EQ(layout.layer(3).runs.size(), 2u);
  EXPECT_EQ(layout.run(1, 2).first_head, 2);
  EXPECT_EQ(layout.run(1, 2).n_kv_heads, 1);
  EXPECT_EQ(layout.run(3, 0).n_kv_heads, 2);
  EXPECT_EQ(layout.run(3, 1).pair, KvPair::parse("KV16"));
  EXPECT_THROW((void)layout.run(1, 3), Error);
  EXPECT_THROW((void)layout.run(0, 1), Error);
  // q8_0: 64 values = 2 blocks of 34 B; q4_0: 2 x 18 B; bf16 2 x 64 B.
  EXPECT_EQ(layout.run(1, 0).key_page_bytes, 16u * 1 * 68);
  EXPECT_EQ(layout.run(3, 0).key_page_bytes, 16u * 2 * 36);
  EXPECT_EQ(layout.run(3, 1).value_page_bytes, 16u * 1 * 128);
  // Runs of one page format share a group: layer 1's first and last heads; a whole 3-head layer
  // of q4_0 is another format than layer 3's two q4_0 heads.
  const TransferGroup& q8 = layout.group(layout.run(1, 0).transfer_group);
  EXPECT_EQ(q8.runs, (std::vector<HeadRunRef>{{1, 0}, {1, 2}}));
  EXPECT_EQ(q8.n_kv_heads, 1);
  EXPECT_NE(layout.run(3, 0).transfer_group, layout.run(1, 1).transfer_group);
  EXPECT_NE(layout.run(3, 0).transfer_group, layout.layer(0).runs[0].transfer_group);
  // Every run's pages tile the chunk image exactly once, and a layer's pages per token are its
  // heads' bytes as the estimator counts them.
  std::vector<int> covered(layout.chunk_bytes(), 0);
  for (const LayerPageGeometry& g : layout.layers()) {
    for (const PageRun& r : g.runs) {
      for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
        for (KvSide s : {KvSide::kKey, KvSide::kValue}) {
          const size_t off = layout.page_offset(g.layer, p, s, r.run);
          for (size_t i = 0; i < layout.page_bytes(g.layer, s, r.run); ++i) ++covered[off + i];
        }
      }
    }
    EXPECT_DOUBLE_EQ(static_cast<double>(g.page_bytes()) / 16.0,
                     plan_layer_bytes(plan, static_cast<size_t>(g.layer)).total())
        << "layer " << g.layer;
  }
  for (size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "byte " << i;
  EXPECT_EQ(layout.chunk_bytes(),
            static_cast<size_t>(
                kv_cache_bytes(plan.model.geometry, plan.kv_config(), plan.quantization, 32, 1)));
}

TEST(PlanLayout, AHeadRunsPageHoldsItsHeadsBytesAsALayerOfItsPair) {
  std::mt19937_64 rng(4);
  std::normal_distribution<float> normal(0.f, 1.f);
  const PlanLayout layout(test::per_head_plan(), {.chunk_tokens = 16});
  const size_t block = 16, dim = 64;
  for (int run = 0; run < 3; ++run) {
    const PageRun& r = layout.run(1, run);
    // The run's page from its head's rows, and the same rows as a one-head layer of its pair.
    std::vector<float> rows(block * dim);
    for (float& x : rows) x = normal(rng);
    std::vector<uint8_t> page(layout.page_bytes(1, KvSide::kKey, run));
    layout.pack_page(1, KvSide::kKey, rows, page, run);
    const KvPageLayout alone(1, {1, 64, 0}, r.pair, {}, layout.settings());
    std::vector<uint8_t> want(alone.page_bytes(KvSide::kKey));
    alone.pack_page(KvSide::kKey, rows, want);
    EXPECT_EQ(page, want) << "run " << run;
    std::vector<float> back(rows.size());
    layout.unpack_page(1, KvSide::kKey, page, back, run);
    std::vector<float> back_alone(rows.size());
    alone.unpack_page(KvSide::kKey, want, back_alone);
    EXPECT_EQ(back, back_alone);
  }
}

TEST(PlanLayout, PerKvHeadPlansHaveTheirOwnFingerprint) {
  // The heads' pairs are part of what the stored bytes mean: neither the per-layer plan an engine
  // would take (each side's widest head format) nor the same heads in another order share it.
  const Plan per_head = test::per_head_plan();
  Plan widest = per_head;
  for (PlanLayer& l : widest.layers) l.heads.clear();
  Plan reordered = per_head;
  std::swap(reordered.layers[3].heads[0], reordered.layers[3].heads[2]);
  EXPECT_NE(plan_fingerprint(per_head), plan_fingerprint(widest));
  EXPECT_NE(plan_fingerprint(per_head), plan_fingerprint(reordered));
}

TEST(PlanLayout, MatchesTheEstimatorPerChunk) {
  const Plan plan = test::mixed_plan(3, 64, 16);
  const PlanLayout layout(plan, {.chunk_tokens = 128});
  for (int l = 0; l < layout.n_layers(); ++l) {
    const uint64_t est = layer_kv_bytes(plan.model.geometry.layers[l], plan.layers[l].pair,
                                        plan.quantization, 128, l);
    EXPECT_EQ(layout.layer(l).page_bytes() * layout.pages_per_chunk(), est) << "layer " << l;
  }
}

TEST(PlanLayout, GroupsIdenticalLayersEvenWhenNotAdjacent) {
  const PlanLayout layout(test::mixed_plan(), {.chunk_tokens = 32});
  ASSERT_EQ(layout.groups().size(), 3u);
  EXPECT_EQ(layout.group(0).runs, (std::vector<HeadRunRef>{{0, 0}, {4, 0}}));
  EXPECT_EQ(layout.group(1).runs, (std::vector<HeadRunRef>{{1, 0}, {3, 0}}));
  EXPECT_EQ(layout.group(2).runs, (std::vector<HeadRunRef>{{2, 0}}));
  size_t total = 0;
  for (const TransferGroup& g : layout.groups()) {
    EXPECT_EQ(g.chunk_offset, total);
    total += g.chunk_bytes;
  }
  EXPECT_EQ(total, layout.chunk_bytes());
  // Page offsets tile the chunk image exactly once.
  std::vector<int> covered(layout.chunk_bytes(), 0);
  for (int l = 0; l < layout.n_layers(); ++l) {
    for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
      for (KvSide s : {KvSide::kKey, KvSide::kValue}) {
        const size_t off = layout.page_offset(l, p, s);
        for (size_t i = 0; i < layout.page_bytes(l, s); ++i) ++covered[off + i];
      }
    }
  }
  for (size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "byte " << i;
}

TEST(PlanLayout, MiniMaxSlotPlanHasTwoGroups) {
  const Plan plan = read_plan(std::filesystem::path(KVPLAN_SOURCE_DIR) /
                              "configs/plans/minimax-m2.5-slot134.json");
  const PlanLayout layout(plan, {.chunk_tokens = 256});
  ASSERT_EQ(layout.groups().size(), 2u);
  EXPECT_EQ(layout.group(0).runs, (std::vector<HeadRunRef>{{0, 0}, {1, 0}, {60, 0}, {61, 0}}));
  EXPECT_EQ(layout.group(1).runs.size(), 58u);
  // bf16: 512 B per token per KV head (K+V); slot: 134.
  EXPECT_EQ(layout.layer(0).page_bytes(), 16u * 8 * 512);
  EXPECT_EQ(layout.layer(5).page_bytes(), 16u * 8 * 134);
  EXPECT_EQ(layout.chunk_bytes(), 256u * 8 * (4 * 512 + 58 * 134));
  std::vector<float> v(layout.page_values(5));
  std::vector<uint8_t> out(layout.page_bytes(5, KvSide::kKey));
  EXPECT_THROW(layout.pack_page(5, KvSide::kKey, v, out), Error);
}

TEST(PlanLayout, RefusesBadChunkSizes) {
  const Plan plan = test::mixed_plan(2, 64, 16);
  EXPECT_THROW(PlanLayout(plan, {.chunk_tokens = 24}), Error);
  EXPECT_THROW(PlanLayout(plan, {.chunk_tokens = 0}), Error);
  Plan kivi = plan;
  kivi.quantization.mode = QuantMode::kKivi;
  kivi.quantization.group_size = 32;
  kivi.quantization.residual_length = 32;
  EXPECT_THROW(PlanLayout(kivi, {.chunk_tokens = 64}), Error);  // block 16 < group 32
  Plan kivi_key = plan;
  kivi_key.layers[0].pair = KvPair::parse("int4_kivi/int4");
  EXPECT_THROW(PlanLayout(kivi_key, {.chunk_tokens = 64}), Error);  // the same, from one layer
}

// A per-token plan whose layer 1 takes int4_kivi keys lays that layer's key pages out per channel
// exactly as the kivi mode does, and leaves layer 0 per token.
TEST(PlanLayout, KiviKeyFormatPagesMatchTheKiviMode) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  Plan plan = test::mixed_plan(2, 64, 32);
  plan.layers[0].pair = KvPair::parse("KV4");
  plan.layers[1].pair = KvPair::parse("int4_kivi/int4");
  Plan kivi = plan;
  kivi.quantization.mode = QuantMode::kKivi;
  kivi.layers[1].pair = KvPair::parse("KV4");
  const PlanLayout layout(plan, {.chunk_tokens = 64}), kivi_layout(kivi, {.chunk_tokens = 64});
  ASSERT_EQ(layout.page_bytes(1, KvSide::kKey), kivi_layout.page_bytes(1, KvSide::kKey));
  std::vector<float> v(layout.page_values(1));
  for (float& x : v) x = normal(rng);
  const auto packed = [&](const PlanLayout& l, int layer) {
    std::vector<uint8_t> out(l.page_bytes(layer, KvSide::kKey));
    l.pack_page(layer, KvSide::kKey, v, out);
    return out;
  };
  EXPECT_EQ(packed(layout, 1), packed(kivi_layout, 1));
  EXPECT_EQ(packed(layout, 0).size(), packed(layout, 1).size());  // 40 B per token and head
  EXPECT_NE(packed(layout, 0), packed(layout, 1));                // per token, not per channel
  EXPECT_NE(packed(layout, 0), packed(kivi_layout, 0));
}

// Pack then unpack every page kind; compare with an f64 bound from the format's step.
TEST(PlanLayout, PackUnpackRoundTripPerTokenAndKivi) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (QuantMode mode : {QuantMode::kPerToken, QuantMode::kKivi}) {
    Plan plan = test::mixed_plan(2, 64, 32);
    plan.quantization.mode = mode;
    const PlanLayout layout(plan, {.chunk_tokens = 64});
    for (int l = 0; l < layout.n_layers(); ++l) {
      for (KvSide s : {KvSide::kKey, KvSide::kValue}) {
        std::vector<float> v(layout.page_values(l)), back(v.size());
        for (float& x : v) x = normal(rng);
        std::vector<uint8_t> bytes(layout.page_bytes(l, s));
        layout.pack_page(l, s, v, bytes);
        layout.unpack_page(l, s, bytes, back);
        double err = 0, ref = 0;
        for (size_t i = 0; i < v.size(); ++i) {
          ASSERT_FALSE(std::isnan(back[i]));
          err += (double(v[i]) - back[i]) * (double(v[i]) - back[i]);
          ref += double(v[i]) * v[i];
        }
        const Format f =
            s == KvSide::kKey ? layout.run(l, 0).pair.key : layout.run(l, 0).pair.value;
        const double bound =
            f.family() == FormatFamily::kPlain ? 1e-4 : (f.info().bits == 4 ? 0.03 : 0.001);
        EXPECT_LT(err / ref, bound) << f.name() << " layer " << l;
      }
    }
  }
}

TEST(PlanLayout, Fp8PagesUseThePlansPerHeadScales) {
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.f, 1.f);
  Plan plan = test::mixed_plan(2, 64, 16);
  plan.layers[0].pair = KvPair::parse("fp8_e4m3/fp8_e5m2");
  // Head 0 runs far above e4m3's 448, head 1 far below 1: one scale each.
  plan.layers[0].fp8_scales = {{3000.0f / 448, 0.01f / 448}, {2.0f, 0.01f / 57344}};
  const PlanLayout layout(plan, {.chunk_tokens = 16});
  const size_t heads = 2, dim = 64;
  std::vector<float> v(layout.page_values(0));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = normal(rng) * ((i / dim) % heads == 0 ? 800 : 0.002f);
  for (const KvSide side : {KvSide::kKey, KvSide::kValue}) {
    const Format f = side == KvSide::kKey ? plan.layers[0].pair.key : plan.layers[0].pair.value;
    const KvHeadScales& s = plan.layers[0].fp8_scales;
    std::vector<uint8_t> bytes(layout.page_bytes(0, side));
    layout.pack_page(0, side, v, bytes);
    // Row by row with the head's own scale: [token][head][row].
    const size_t row_bytes = packed_row_bytes(f, dim, 32);
    for (size_t r = 0; r < v.size() / dim; ++r) {
      const size_t h = r % heads;
      const float scale = side == KvSide::kKey ? s.key_scale(static_cast<int>(h))
                                               : s.value_scale(static_cast<int>(h));
      std::vector<uint8_t> row(row_bytes);
      pack_row(f, {v.data() + r * dim, dim}, row, {.group_size = 32, .fp8_scale = scale});
      ASSERT_TRUE(std::equal(row.begin(), row.end(), bytes.begin() + r * row_bytes))
          << f.name() << " row " << r;
    }
    std::vector<float> back(v.size());
    layout.unpack_page(0, side, bytes, back);
    for (size_t i = 0; i < v.size(); ++i) {
      const double magnitude = (i / dim) % heads == 0 ? 800 : 0.002;
      ASSERT_NEAR(back[i], v[i], 0.13 * std::fabs(v[i]) + 1e-3 * magnitude)
          << f.name() << " value " << i;
    }
  }
}

}  // namespace
}  // namespace kvplan
