// Overlap between prompt sets: identical samples, shared 13-token runs at any offset, runs one
// token too short, short samples, the order of the reported pair, and the refused n-gram length.
#include "profile/text_overlap.h"

#include <algorithm>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

using Samples = std::vector<std::vector<int32_t>>;

// Random token ids from disjoint ranges, so two sets drawn from different ranges share nothing.
std::vector<int32_t> random_tokens(std::mt19937& rng, size_t length, int32_t low, int32_t high) {
  std::uniform_int_distribution<int32_t> token(low, high);
  std::vector<int32_t> out(length);
  for (int32_t& t : out) t = token(rng);
  return out;
}

Samples random_set(std::mt19937& rng, size_t count, int32_t low, int32_t high) {
  Samples out;
  for (size_t k = 0; k < count; ++k) out.push_back(random_tokens(rng, 20 + k * 7, low, high));
  return out;
}

// `run` written into `sample` at `offset`.
void embed(std::vector<int32_t>& sample, const std::vector<int32_t>& run, size_t offset) {
  std::copy(run.begin(), run.end(), sample.begin() + static_cast<std::ptrdiff_t>(offset));
}

TEST(TextOverlap, DisjointSetsDoNotOverlap) {
  std::mt19937 rng(3);
  const Samples a = random_set(rng, 12, 0, 999);
  const Samples b = random_set(rng, 9, 1000, 1999);
  const TextOverlap o = find_text_overlap(a, b);
  EXPECT_FALSE(o.overlaps);
  EXPECT_TRUE(o.reason.empty());
  EXPECT_FALSE(find_text_overlap(a, {}).overlaps);
  EXPECT_FALSE(find_text_overlap({}, b).overlaps);
}

TEST(TextOverlap, IdenticalSample) {
  std::mt19937 rng(5);
  Samples a = random_set(rng, 4, 0, 999);
  Samples b = random_set(rng, 6, 1000, 1999);
  b[4] = a[2];
  const TextOverlap o = find_text_overlap(a, b);
  ASSERT_TRUE(o.overlaps);
  EXPECT_EQ(o.sample_a, 2u);
  EXPECT_EQ(o.sample_b, 4u);
  EXPECT_EQ(o.reason, "sample 2 is identical to sample 4 (34 tokens)");
}

TEST(TextOverlap, SharedRunAtDifferentOffsets) {
  std::mt19937 rng(7);
  Samples a = random_set(rng, 5, 0, 999);
  Samples b = random_set(rng, 8, 1000, 1999);
  const std::vector<int32_t> run = random_tokens(rng, 13, 2000, 2999);
  embed(a[3], run, 5);   // a[3] has 41 tokens
  embed(b[6], run, 40);  // b[6] has 62 tokens
  const TextOverlap o = find_text_overlap(a, b);
  ASSERT_TRUE(o.overlaps);
  EXPECT_EQ(o.sample_a, 3u);
  EXPECT_EQ(o.sample_b, 6u);
  EXPECT_EQ(o.reason, "sample 3 and sample 6 share a run of 13 tokens (from token 5 and 40)");

  // The run at the very end of one sample and the very start of the other.
  a = random_set(rng, 2, 0, 999);
  b = random_set(rng, 2, 1000, 1999);
  embed(a[1], run, a[1].size() - run.size());
  embed(b[0], run, 0);
  const TextOverlap edge = find_text_overlap(a, b);
  ASSERT_TRUE(edge.overlaps);
  EXPECT_EQ(edge.sample_a, 1u);
  EXPECT_EQ(edge.sample_b, 0u);
}

TEST(TextOverlap, TwelveTokenRunIsNotOverlap) {
  std::mt19937 rng(11);
  Samples a = random_set(rng, 5, 0, 999);
  Samples b = random_set(rng, 5, 1000, 1999);
  const std::vector<int32_t> run = random_tokens(rng, 12, 2000, 2999);
  embed(a[1], run, 3);
  embed(b[2], run, 9);
  EXPECT_FALSE(find_text_overlap(a, b).overlaps);
  // ... but it is one under a 12-token n-gram.
  const TextOverlap o = find_text_overlap(a, b, {.ngram_tokens = 12});
  ASSERT_TRUE(o.overlaps);
  EXPECT_EQ(o.sample_a, 1u);
  EXPECT_EQ(o.sample_b, 2u);
}

TEST(TextOverlap, ShortSamplesCountOnlyWhenIdentical) {
  const Samples a = {{1, 2, 3}, {7, 8, 9, 10}, {}};
  // b[0] contains a[1] but is not identical to it: shorter than the n-gram, so no overlap.
  EXPECT_FALSE(find_text_overlap(a, {{6, 7, 8, 9, 10, 11}, {}}).overlaps);
  const TextOverlap o = find_text_overlap(a, {{6, 7, 8, 9, 10, 11}, {7, 8, 9, 10}});
  ASSERT_TRUE(o.overlaps);
  EXPECT_EQ(o.sample_a, 1u);
  EXPECT_EQ(o.sample_b, 1u);
  EXPECT_EQ(o.reason, "sample 1 is identical to sample 1 (4 tokens)");
}

TEST(TextOverlap, ReportsLowestPairDeterministically) {
  std::mt19937 rng(13);
  Samples a = random_set(rng, 8, 0, 999);
  Samples b = random_set(rng, 8, 1000, 1999);
  const std::vector<int32_t> run1 = random_tokens(rng, 13, 2000, 2999);
  const std::vector<int32_t> run2 = random_tokens(rng, 13, 3000, 3999);
  const std::vector<int32_t> run3 = random_tokens(rng, 13, 4000, 4999);
  embed(a[6], run1, 0);  // a later sample of A with a lower sample of B: not first
  embed(b[0], run1, 7);
  embed(a[4], run2, 5);  // a[4] meets b[5] first in its tokens, but b[2] is the lower index
  embed(b[5], run2, 1);
  embed(a[4], run3, 30);
  embed(b[2], run3, 20);
  b[7] = a[5];
  for (int repeat = 0; repeat < 3; ++repeat) {
    const TextOverlap o = find_text_overlap(a, b);
    ASSERT_TRUE(o.overlaps);
    EXPECT_EQ(o.sample_a, 4u);
    EXPECT_EQ(o.sample_b, 2u);
    EXPECT_EQ(o.reason, "sample 4 and sample 2 share a run of 13 tokens (from token 30 and 20)");
  }
  // Without a[4]'s runs a[5] comes first; it also shares every run with b[7], and is reported as
  // identical.
  a[4] = random_tokens(rng, 48, 0, 999);
  const TextOverlap o = find_text_overlap(a, b);
  ASSERT_TRUE(o.overlaps);
  EXPECT_EQ(o.sample_a, 5u);
  EXPECT_EQ(o.sample_b, 7u);
  EXPECT_EQ(o.reason, "sample 5 is identical to sample 7 (55 tokens)");
}

TEST(TextOverlap, ZeroNgramRefused) {
  try {
    (void)find_text_overlap({{1}}, {{1}}, {.ngram_tokens = 0});
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("ngram_tokens"), std::string::npos);
  }
}

}  // namespace
}  // namespace kvplan
