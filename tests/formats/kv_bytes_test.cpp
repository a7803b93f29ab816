#include "formats/kv_bytes.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::vector<KvPair> all(int n, const char* pair) {
  return std::vector<KvPair>(n, KvPair::parse(pair));
}

QuantSettings exact() {
  QuantSettings s;
  s.block_size = 1;
  return s;
}

TEST(MemoryEstimate, Llama8bF16IsFourGiBAt32K) {
  // 32 layers x 8 KV heads x 128 x (K+V) x 2 bytes x 32768 tokens = 4 GiB exactly.
  const KvGeometry g = KvGeometry::uniform("llama", 32, 8, 128);
  const auto f16 = all(32, "f16/f16");
  EXPECT_EQ(kv_cache_bytes(g, f16, exact(), 32768, 1), 4294967296ull);
  const int64_t contexts[] = {4096, 8192, 16384, 32768, 65536, 131072};
  const uint64_t expected[] = {kGiB / 2, kGiB, 2 * kGiB, 4 * kGiB, 8 * kGiB, 16 * kGiB};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(kv_cache_bytes(g, f16, exact(), contexts[i], 1), expected[i]);
  EXPECT_EQ(kv_cache_bytes(g, f16, exact(), 32768, 4), 16 * kGiB);
  EXPECT_EQ(kv_cache_bytes(KvGeometry::uniform("mha", 32, 32, 128), f16, exact(), 32768, 1),
            16 * kGiB);
  EXPECT_EQ(kv_cache_bytes(KvGeometry::uniform("mqa", 32, 1, 128), f16, exact(), 32768, 1),
            kGiB / 2);
}

TEST(MemoryEstimate, BytesPerTokenOfLlama8b) {
  const KvGeometry g = KvGeometry::uniform("llama", 32, 8, 128);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(g, all(32, "KV16"), exact()), 131072.0);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(g, all(32, "q8_0/q8_0"), exact()), 69632.0);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(g, all(32, "q4_0/q4_0"), exact()), 36864.0);
}

TEST(MemoryEstimate, MiniMaxSlotLayoutIs3_23xSmallerThanBf16) {
  // First 2 and last 2 of 62 layers bf16 (512 B per token per KV head), 58 layers slot:134.
  const KvGeometry g = KvGeometry::uniform("minimax", 62, 8, 128);
  std::vector<KvPair> plan = all(62, "slot:134");
  for (int l : {0, 1, 60, 61}) plan[l] = KvPair::parse("KV16");
  const double ratio =
      kv_bytes_per_token(g, all(62, "KV16"), exact()) / kv_bytes_per_token(g, plan, exact());
  EXPECT_NEAR(ratio, 31744.0 / 9820.0, 1e-12);
  EXPECT_NEAR(ratio, 3.23, 0.005);
}

TEST(MemoryEstimate, SlidingWindowCapsTokensKept) {
  KvGeometry g = KvGeometry::uniform("swa", 2, 4, 64);
  g.layers[1].sliding_window = 4096;
  const auto f16 = all(2, "f16/f16");
  const uint64_t per_token_layer = 4 * 64 * 2 * 2;
  EXPECT_EQ(kv_cache_bytes(g, f16, exact(), 1000, 1), 2 * 1000 * per_token_layer);
  EXPECT_EQ(kv_cache_bytes(g, f16, exact(), 100000, 1), (100000 + 4096) * per_token_layer);
}

TEST(MemoryEstimate, PagesRoundUp) {
  const KvGeometry g = KvGeometry::uniform("m", 1, 1, 64);
  QuantSettings s;
  s.block_size = 16;
  EXPECT_EQ(kv_cache_bytes(g, all(1, "f16/f16"), s, 17, 1), 32u * 256);
  EXPECT_EQ(kv_cache_bytes(g, all(1, "f16/f16"), s, 16, 1), 16u * 256);
}

TEST(MemoryEstimate, PerLayerKvHeads) {
  KvGeometry g = KvGeometry::uniform("m", 3, 2, 64);
  g.layers[2].n_kv_heads = 8;
  EXPECT_EQ(kv_cache_bytes(g, all(3, "f16/f16"), exact(), 10, 1), 10u * (2 + 2 + 8) * 256);
}

TEST(MemoryEstimate, KiviKeysPerChannelAndResidualWindow) {
  const KvGeometry g = KvGeometry::uniform("m", 1, 1, 128);
  QuantSettings s;
  s.mode = QuantMode::kKivi;
  s.group_size = 32;
  s.residual_length = 32;
  s.block_size = 1;
  const auto int4 = all(1, "KV4");
  // 64 tokens = 2 full groups: K = 2 groups x 128 channels x (4 + 16) B; V = 64 x 128-value rows.
  EXPECT_EQ(kv_cache_bytes(g, int4, s, 64, 1), 2u * 128 * 20 + 64u * 80);
  // 70 tokens: 6 residual tokens stay bf16 for K and V.
  EXPECT_EQ(kv_cache_bytes(g, int4, s, 70, 1), 2u * 128 * 20 + 64u * 80 + 6u * 128 * 2 * 2);
  EXPECT_DOUBLE_EQ(layer_bytes_per_token(g.layers[0], int4[0], s, 0).key, 128.0 * 20 / 32);
}

// A KIVI key format in a per-token plan: that layer is priced as under the kivi mode (keys per
// channel, residual window in bf16), the others per token.
TEST(MemoryEstimate, KiviKeyFormatOnOneLayerOfAPerTokenPlan) {
  const KvGeometry g = KvGeometry::uniform("m", 2, 1, 128);
  QuantSettings s;
  s.block_size = 1;
  std::vector<KvPair> pairs = {KvPair::parse("int4_kivi/int4"), KvPair::parse("KV4")};
  QuantSettings kivi = s;
  kivi.mode = QuantMode::kKivi;
  const uint64_t kivi_layer = layer_kv_bytes(g.layers[0], KvPair::parse("KV4"), kivi, 70, 0);
  EXPECT_EQ(kivi_layer, 2u * 128 * 20 + 64u * 80 + 6u * 128 * 2 * 2);
  EXPECT_EQ(kv_cache_bytes(g, pairs, s, 70, 1), kivi_layer + 70u * (80 + 80));
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(g, pairs, s), 128.0 * 20 / 32 + 80 + 80 + 80);
  // Values never take a KIVI format; a KIVI layer needs a residual window of whole groups.
  EXPECT_THROW((void)kv_bytes_per_token(g, all(2, "int4/int4_kivi"), s), Error);
  s.residual_length = 48;
  EXPECT_THROW((void)kv_bytes_per_token(g, pairs, s), Error);
  EXPECT_NO_THROW((void)kv_bytes_per_token(g, all(2, "KV4"), s));
}

TEST(MemoryEstimate, FormatThatCannotPackTheHeadNamesTheLayer) {
  const KvGeometry g = KvGeometry::uniform("stories", 5, 4, 8);
  try {
    (void)kv_cache_bytes(g, all(5, "q4_0/q4_0"), exact(), 256, 1);
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("layer 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("q4_0"), std::string::npos) << msg;
  }
  // int formats clamp the group to head_dim 8: (4 + 4) B per int4 row.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(g, all(5, "KV4"), exact()), 5.0 * 4 * 2 * 8);
}

TEST(MemoryEstimate, TokensThatFitIsTheLargestCountUnderTheBudget) {
  const KvGeometry g = KvGeometry::uniform("llama", 32, 8, 128);
  const auto f16 = all(32, "f16/f16");
  EXPECT_EQ(max_tokens_that_fit(g, f16, exact(), 4 * kGiB, 1), 32768);
  EXPECT_EQ(max_tokens_that_fit(g, f16, exact(), 4 * kGiB - 1, 1), 32767);
  EXPECT_EQ(max_tokens_that_fit(g, f16, exact(), 4 * kGiB, 4), 8192);
  EXPECT_EQ(max_tokens_that_fit(g, f16, exact(), 100, 1), 0);
  EXPECT_THROW((void)max_tokens_that_fit(g, f16, exact(), kGiB, 0), Error);
  EXPECT_THROW((void)kv_cache_bytes(g, f16, exact(), -1, 1), Error);
  EXPECT_THROW((void)kv_cache_bytes(g, all(31, "KV8"), exact(), 1, 1), Error);
}

// A configuration per KV head counts each head as a layer of one head: alike heads give the
// per-layer bytes, and a layer's heads in two formats give half of each.
TEST(KvBytes, ConfigurationsPerKvHeadCountEachHeadsBytes) {
  const KvGeometry g = KvGeometry::uniform("m", 2, 2, 64);
  const KvPair q8 = KvPair::parse("q8_0/q8_0"), q4 = KvPair::parse("q4_0/q4_0");
  const QuantSettings s{};
  EXPECT_EQ(kv_cache_bytes(g, std::vector<KvPair>(4, q8), s, 1000, 3),
            kv_cache_bytes(g, std::vector<KvPair>(2, q8), s, 1000, 3));
  const std::vector<KvPair> mixed{q8, q4, q4, q4};
  EXPECT_EQ(kv_cache_bytes(g, mixed, s, 1000, 1),
            (kv_cache_bytes(g, std::vector<KvPair>(2, q8), s, 1000, 1) +
             3 * kv_cache_bytes(g, std::vector<KvPair>(2, q4), s, 1000, 1)) /
                4);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(g, mixed, s), (68 + 68) + 3 * (36 + 36));
  EXPECT_DOUBLE_EQ(kv_equivalent_bits(g, mixed), (6.0 + 4.0) / 2);
  EXPECT_DOUBLE_EQ(kv_equivalent_bits(g, std::vector<KvPair>(2, q8)), 8.0);
  EXPECT_THROW((void)kv_cache_bytes(g, std::vector<KvPair>(3, q8), s, 10, 1), Error);
}

}  // namespace
}  // namespace kvplan
