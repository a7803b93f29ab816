// attend_chunk against a naive f64 causal softmax, over several query blocks and key tiles, a chunk
// that starts after cached tokens, decode steps split over key spans, sliding windows and
// grouped-query heads; split decode steps give the same bits for any thread count.
#include "model/attention.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "formats/kv_pair.h"
#include "model/transformer.h"

namespace kvplan {
namespace {

struct Case {
  size_t cached = 0;  // tokens already in the cache before the chunk
  size_t chunk = 0;   // queries in the chunk
  int64_t window = 0;
};

std::vector<float> random_values(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void expect_matches_naive(const Case& c) {
  const AttentionShape shape{.n_heads = 4, .n_kv_heads = 2, .head_dim = 8, .window = c.window};
  const size_t total = c.cached + c.chunk;
  const size_t kv_width = static_cast<size_t>(shape.n_kv_heads * shape.head_dim);
  const size_t q_width = static_cast<size_t>(shape.n_heads * shape.head_dim);
  std::mt19937 rng(static_cast<uint32_t>(total * 31 + static_cast<size_t>(c.window)));
  const std::vector<float> k = random_values(rng, total * kv_width);
  const std::vector<float> v = random_values(rng, total * kv_width);
  const std::vector<float> q = random_values(rng, c.chunk * q_width);
  LayerKvCache cache(0, {shape.n_kv_heads, shape.head_dim, c.window}, /*exact=*/true,
                     KvPair::parse("f16/f16"), QuantSettings{});
  cache.append(k.data(), v.data(), total, kv_width);
  cache.commit();
  std::vector<float> out(c.chunk * q_width, -1.0f);
  attend_chunk(q.data(), q_width, c.chunk, c.cached, cache, shape, out.data(), q_width);

  const int hd = shape.head_dim;
  double worst = 0;
  for (size_t t = 0; t < c.chunk; ++t) {
    const size_t position = c.cached + t;
    const size_t first =
        c.window > 0 && position + 1 > static_cast<size_t>(c.window) ? position + 1 - c.window : 0;
    for (int h = 0; h < shape.n_heads; ++h) {
      const int g = h / (shape.n_heads / shape.n_kv_heads);
      std::vector<double> score;
      double max = -1e300;
      for (size_t j = first; j <= position; ++j) {
        double dot = 0;
        for (int d = 0; d < hd; ++d) {
          dot += static_cast<double>(q[t * q_width + h * hd + d]) * k[j * kv_width + g * hd + d];
        }
        score.push_back(dot / std::sqrt(static_cast<double>(hd)));
        max = std::max(max, score.back());
      }
      double sum = 0;
      for (double& s : score) sum += (s = std::exp(s - max));
      for (int d = 0; d < hd; ++d) {
        double o = 0;
        for (size_t j = first; j <= position; ++j) {
          o += score[j - first] / sum * v[j * kv_width + g * hd + d];
        }
        worst = std::max(worst, std::abs(o - out[t * q_width + h * hd + d]));
      }
    }
  }
  EXPECT_LT(worst, 1e-5) << "cached " << c.cached << ", chunk " << c.chunk << ", window "
                         << c.window;
}

TEST(Attention, PrefillOverSeveralQueryBlocksMatchesNaiveF64) {
  expect_matches_naive({.cached = 0, .chunk = 150});
}

TEST(Attention, ChunkAfterCachedTokensMatchesNaiveF64) {
  expect_matches_naive({.cached = 37, .chunk = 100});
  expect_matches_naive({.cached = 200, .chunk = 1});    // one decode step
  expect_matches_naive({.cached = 300, .chunk = 150});  // several key tiles and query blocks
}

TEST(Attention, DecodeOverSeveralKeySpansMatchesNaiveF64) {
  expect_matches_naive({.cached = 511, .chunk = 1});   // the last position of one span
  expect_matches_naive({.cached = 512, .chunk = 1});   // the first of a second
  expect_matches_naive({.cached = 1700, .chunk = 1});  // four spans, the last partial
  expect_matches_naive({.cached = 1300, .chunk = 1, .window = 700});  // a window across spans
}

TEST(Attention, SplitDecodeGivesTheSameBitsForAnyThreadCount) {
  const AttentionShape shape{.n_heads = 4, .n_kv_heads = 1, .head_dim = 64};
  const size_t total = 2000;
  const size_t kv_width = static_cast<size_t>(shape.n_kv_heads * shape.head_dim);
  const size_t q_width = static_cast<size_t>(shape.n_heads * shape.head_dim);
  std::mt19937 rng(7);
  const std::vector<float> k = random_values(rng, total * kv_width);
  const std::vector<float> v = random_values(rng, total * kv_width);
  const std::vector<float> q = random_values(rng, q_width);
  LayerKvCache cache(0, {shape.n_kv_heads, shape.head_dim, 0}, /*exact=*/false,
                     KvPair::parse("q4_0/q8_0"), QuantSettings{});
  cache.append(k.data(), v.data(), total, kv_width);
  cache.commit();
  std::vector<std::vector<float>> outs;
  const int saved = compute_threads();
  for (int threads : {1, 2, 3}) {
    set_compute_threads(threads);
    std::vector<float> out(q_width);
    attend_chunk(q.data(), q_width, 1, total - 1, cache, shape, out.data(), q_width);
    outs.push_back(out);
  }
  set_compute_threads(saved);
  for (size_t i = 1; i < outs.size(); ++i) {
    EXPECT_EQ(std::memcmp(outs[0].data(), outs[i].data(), q_width * sizeof(float)), 0);
  }
}

TEST(Attention, SlidingWindowSeesOnlyItsKeys) {
  expect_matches_naive({.cached = 0, .chunk = 150, .window = 20});
  expect_matches_naive({.cached = 90, .chunk = 70, .window = 64});
  expect_matches_naive({.cached = 5, .chunk = 3, .window = 100});  // window wider than context
}

}  // namespace
}  // namespace kvplan
