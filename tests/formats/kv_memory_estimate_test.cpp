#include "formats/kv_memory_estimate.h"

#include <utility>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

KvMemoryQuestion at(std::vector<int64_t> contexts, int64_t sequences = 1) {
  KvMemoryQuestion q;
  q.contexts = std::move(contexts);
  q.sequences = sequences;
  return q;
}

QuantSettings exact_tokens() {
  QuantSettings s;
  s.block_size = 1;
  return s;
}

TEST(KvMemoryEstimate, K8V4OnLlama8bAgainstBf16) {
  // 32 layers x 8 KV heads x (int8 keys 128 + int4 values 64 + 2 x 16 bytes of group scales).
  const KvGeometry g = KvGeometry::uniform("llama", 32, 8, 128);
  const std::vector<KvPair> k8v4(32, KvPair::parse("K8V4"));
  const KvMemoryEstimate e = estimate_kv_memory(g, k8v4, exact_tokens(), at({32768, 1}, 2));
  EXPECT_DOUBLE_EQ(e.bytes_per_token, 57344.0);
  EXPECT_DOUBLE_EQ(e.equivalent_bits, 6.0);
  ASSERT_EQ(e.contexts.size(), 2u);
  EXPECT_EQ(e.contexts[0].context, 32768);
  EXPECT_EQ(e.contexts[0].bytes, 2 * 57344ull * 32768);
  EXPECT_EQ(e.contexts[0].bf16_bytes, 8 * kGiB);
  EXPECT_DOUBLE_EQ(e.contexts[0].compression_vs_bf16(), 131072.0 / 57344.0);
  EXPECT_EQ(e.contexts[1].bytes, 2 * 57344ull);
  EXPECT_FALSE(e.max_context_per_sequence.has_value());
}

TEST(KvMemoryEstimate, LongestContextThatFitsTheAvailableMemory) {
  const KvGeometry g = KvGeometry::uniform("llama", 32, 8, 128);
  const std::vector<KvPair> bf16(32, KvPair::parse("KV16"));
  KvMemoryQuestion q{.contexts = {}, .sequences = 4, .available_bytes = 16 * kGiB};
  EXPECT_EQ(estimate_kv_memory(g, bf16, exact_tokens(), q).max_context_per_sequence, 32768);
  q.available_bytes = 100;
  EXPECT_EQ(estimate_kv_memory(g, bf16, exact_tokens(), q).max_context_per_sequence, 0);
}

TEST(KvMemoryEstimate, AnEmptyCacheCompressesNothing) {
  EXPECT_EQ((KvContextBytes{.context = 0, .bytes = 0, .bf16_bytes = 0}).compression_vs_bf16(), 0.0);
}

TEST(KvMemoryEstimate, FormatsThatCannotPackARowAreRefused) {
  const KvGeometry tiny = KvGeometry::uniform("tiny", 2, 1, 8);
  EXPECT_FALSE(pair_fits_every_layer(tiny, KvPair::parse("q8_0/q8_0"), exact_tokens()));
  EXPECT_TRUE(pair_fits_every_layer(tiny, KvPair::parse("K8V4"), exact_tokens()));
  const std::vector<KvPair> q8(2, KvPair::parse("q8_0/q8_0"));
  EXPECT_THROW(estimate_kv_memory(tiny, q8, exact_tokens(), at({16})), Error);
}

}  // namespace
}  // namespace kvplan
