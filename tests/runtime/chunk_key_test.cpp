#include "runtime/chunk_key.h"

#include <random>

#include <gtest/gtest.h>

#include "plan/plan_fingerprint.h"
#include "runtime_test_util.h"

namespace kvplan {
namespace {

TEST(ChunkKey, ChainsOverThePrefix) {
  std::mt19937_64 rng(1);
  const std::vector<uint32_t> a = test::random_tokens(rng, 1000);
  std::vector<uint32_t> b = a;
  b[300] += 1;  // inside chunk 1
  const auto ka = chunk_keys({1, 2}, a, 256);
  const auto kb = chunk_keys({1, 2}, b, 256);
  ASSERT_EQ(ka.size(), 3u);  // the 232-token tail gets no key
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_NE(ka[1], kb[1]);
  EXPECT_NE(ka[2], kb[2]);                          // same tokens, different prefix
  EXPECT_NE(chunk_keys({1, 3}, a, 256)[0], ka[0]);  // another plan
  EXPECT_NE(chunk_keys({4, 2}, a, 256)[0], ka[0]);  // another model
  EXPECT_NE(chunk_keys({1, 2}, a, 128)[1], ka[0]);
}

// Pinned values, reproduced independently with Python's xxhash package (xxh3_64 of the same
// length-prefixed root fields, then of each chunk's little-endian uint32 tokens seeded by the
// previous key). A change here breaks every cache written by an earlier build or another machine.
TEST(ChunkKey, StableAcrossBuilds) {
  std::vector<uint32_t> tokens(512);
  for (uint32_t i = 0; i < tokens.size(); ++i) tokens[i] = i * 7919u % 32000u;
  const auto k = chunk_keys({0x0123456789abcdefull, 0xfedcba9876543210ull}, tokens, 256);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0], KVPLAN_GOLDEN_KEY0);
  EXPECT_EQ(k[1], KVPLAN_GOLDEN_KEY1);
}

TEST(PlanFingerprint, IgnoresMeasurementsButNotFormats) {
  Plan p = test::mixed_plan();
  const uint64_t fp = plan_fingerprint(p);
  p.created = "later";
  p.results.quality.mean_kl = 0.1;
  EXPECT_EQ(plan_fingerprint(p), fp);
  p.layers[2].pair = KvPair::parse("KV8");
  EXPECT_NE(plan_fingerprint(p), fp);
  Plan q = test::mixed_plan();
  q.quantization.block_size = 32;
  EXPECT_NE(plan_fingerprint(q), fp);
}

}  // namespace
}  // namespace kvplan
