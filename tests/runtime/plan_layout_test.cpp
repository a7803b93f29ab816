#include "runtime/plan_layout.h"

#include <cmath>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/kv_bytes.h"
#include "formats/pack.h"
#include "runtime_test_util.h"

namespace kvplan {
namespace {

TEST(PlanLayout, PageBytesComputedByHand) {
  const Plan plan = test::mixed_plan(2, 64, 16);
  const PlanLayout layout(plan, {.chunk_tokens = 64});
  EXPECT_EQ(layout.pages_per_chunk(), 4u);
  // bf16: 16 tokens x 2 heads x 64 values x 2 B.
  EXPECT_EQ(layout.layer(0).key_page_bytes, 16u * 2 * 128);
  // q4_0: 64 values = 2 blocks of 18 B.
  EXPECT_EQ(layout.layer(1).key_page_bytes, 16u * 2 * 36);
  // int8 group 32: 2 x (4 + 32) B; int4: 2 x (4 + 16) B.
  EXPECT_EQ(layout.layer(2).key_page_bytes, 16u * 2 * 72);
  EXPECT_EQ(layout.layer(2).value_page_bytes, 16u * 2 * 40);
}

TEST(PlanLayout, RefusesPerKvHeadPlansItCannotPage) {
  Plan plan = test::mixed_plan(2, 64, 16);
  plan.layers[1].heads = {KvPair::parse("q8_0/q8_0"), KvPair::parse("q4_0/q4_0")};
  try {
    const PlanLayout layout(plan, {.chunk_tokens = 64});
    ADD_FAILURE() << "a per-KV-head plan was paged";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("layer 1"), std::string::npos) << e.what();
  }
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
  EXPECT_EQ(layout.group(0).layers, (std::vector<int>{0, 4}));
  EXPECT_EQ(layout.group(1).layers, (std::vector<int>{1, 3}));
  EXPECT_EQ(layout.group(2).layers, (std::vector<int>{2}));
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
  EXPECT_EQ(layout.group(0).layers, (std::vector<int>{0, 1, 60, 61}));
  EXPECT_EQ(layout.group(1).layers.size(), 58u);
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
        const Format f = s == KvSide::kKey ? layout.layer(l).pair.key : layout.layer(l).pair.value;
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
