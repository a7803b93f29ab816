// The packed paged cache returns, at every step of a prefill-then-decode schedule, bit for bit the
// rows the former round-trip cache held (each token packed and unpacked once, in place, when it
// was committed; KIVI's windows with per-channel key groups and its exact residual) — for every
// format family and both modes — and attention over its pages equals attention over an exact
// cache holding those round-trip rows.
#include "model/kv_cache.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/math/hadamard.h"
#include "formats/pack.h"
#include "model/attention.h"

namespace kvplan {
namespace {

constexpr int kHeads = 2;
constexpr int kDim = 64;
constexpr size_t kWidth = kHeads * kDim;

// The former cache's algorithm, kept here as the oracle: f32 rows [token][head][dim], each token
// quantized in place once, when committed.
class RoundTripOracle {
 public:
  RoundTripOracle(KvPair pair, QuantSettings settings, KvHeadScales scales)
      : pair_(pair),
        settings_(settings),
        scales_(std::move(scales)),
        kivi_(layer_runs_kivi(pair, settings)) {}

  void append(const std::vector<float>& k, const std::vector<float>& v) {
    k_.insert(k_.end(), k.begin(), k.end());
    v_.insert(v_.end(), v.begin(), v.end());
  }

  void commit() {
    const size_t n = k_.size() / kWidth;
    if (!kivi_) {
      for (; committed_ < n; ++committed_) round_trip_values_of(committed_, true);
      return;
    }
    const size_t window = settings_.residual_length, g = settings_.group_size;
    while (n - committed_ >= window) {
      for (int h = 0; h < kHeads; ++h) {
        const PackOptions opt{.group_size = g, .fp8_scale = scales_.key_scale(h)};
        const size_t bytes = channel_group_bytes(pair_.key, kDim, g);
        std::vector<uint8_t> packed(bytes);
        for (size_t t = committed_; t + g <= committed_ + window; t += g) {
          float* block = k_.data() + t * kWidth + static_cast<size_t>(h) * kDim;
          pack_channels(pair_.key, block, g, kDim, kWidth, packed, opt);
          unpack_channels(pair_.key, packed, g, kDim, block, kWidth, opt);
        }
      }
      for (size_t t = committed_; t < committed_ + window; ++t) round_trip_values_of(t, false);
      committed_ += window;
    }
  }

  [[nodiscard]] const std::vector<float>& keys() const { return k_; }
  [[nodiscard]] const std::vector<float>& values() const { return v_; }

 private:
  void round_trip(Format f, float* row, float scale) {
    const PackOptions opt{.group_size = settings_.group_size, .fp8_scale = scale};
    std::vector<uint8_t> packed(packed_row_bytes(f, kDim, settings_.group_size));
    pack_row(f, {row, kDim}, packed, opt);
    unpack_row(f, packed, {row, kDim}, opt);
  }
  void round_trip_values_of(size_t t, bool keys_too) {
    for (int h = 0; h < kHeads; ++h) {
      const size_t at = t * kWidth + static_cast<size_t>(h) * kDim;
      if (keys_too) round_trip(pair_.key, k_.data() + at, scales_.key_scale(h));
      round_trip(pair_.value, v_.data() + at, scales_.value_scale(h));
    }
  }

  KvPair pair_;
  QuantSettings settings_;
  KvHeadScales scales_;
  bool kivi_;
  size_t committed_ = 0;
  std::vector<float> k_, v_;
};

struct Case {
  std::string pair;
  QuantMode mode = QuantMode::kPerToken;
  bool chunk_attends_quantized = true;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.pair + (info.param.mode == QuantMode::kKivi ? "_kivi" : "") +
                     (info.param.chunk_attends_quantized ? "" : "_exact_chunk");
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return name;
}

KvHeadScales scales_for(const KvPair& pair) {
  KvHeadScales s;
  if (pair.key.has_tensor_scale()) s.key = {0.011f, 0.029f};
  if (pair.value.has_tensor_scale()) s.value = {0.017f, 0.0043f};
  return s;
}

class PackedCache : public ::testing::TestWithParam<Case> {};

// Prefill of 77 tokens, 40 decode steps, then a chunk of 38: tokens cross pages (32), KIVI windows
// (32) and attention's key tiles (128).
TEST_P(PackedCache, ReadsTheRoundTripRowsAndAttendsAlikeAtEveryStep) {
  const Case& c = GetParam();
  const KvPair pair = KvPair::parse(c.pair);
  QuantSettings settings;
  settings.mode = c.mode;
  const KvHeadScales scales = scales_for(pair);
  LayerKvCache cache(3, {kHeads, kDim, 0}, false, pair, settings, scales);
  RoundTripOracle oracle(pair, settings, scales);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const auto random_rows = [&](size_t n) {
    std::vector<float> x(n * kWidth);
    for (float& v : x) v = dist(rng);
    return x;
  };
  const AttentionShape shape{.n_heads = 2 * kHeads, .n_kv_heads = kHeads, .head_dim = kDim};
  const size_t q_width = static_cast<size_t>(shape.n_heads * kDim);
  std::vector<float> head_rows, scratch(cache.read_scratch_floats());
  size_t pos = 0;
  for (const size_t step : {size_t{77}, size_t{1}, size_t{1}, size_t{38}}) {
    for (size_t repeat = 0; repeat < (step == 1 ? 20 : 1); ++repeat) {
      const std::vector<float> k = random_rows(step), v = random_rows(step);
      cache.append(k.data(), v.data(), step, kWidth);
      oracle.append(k, v);
      if (c.chunk_attends_quantized) {
        cache.commit();
        oracle.commit();
      }
      // What attention reads: every held row of every head.
      const size_t n = cache.n_tokens();
      head_rows.resize(n * kDim);
      for (const KvSide side : {KvSide::kKey, KvSide::kValue}) {
        const std::vector<float>& want = side == KvSide::kKey ? oracle.keys() : oracle.values();
        for (int h = 0; h < kHeads; ++h) {
          cache.read(side, h, 0, n, head_rows.data(), scratch);
          for (size_t t = 0; t < n; ++t) {
            ASSERT_EQ(std::memcmp(head_rows.data() + t * kDim,
                                  want.data() + t * kWidth + static_cast<size_t>(h) * kDim,
                                  kDim * sizeof(float)),
                      0)
                << (side == KvSide::kKey ? "key" : "value") << " token " << t << " head " << h
                << " of " << n;
          }
        }
      }
      // A rotated side read in its rotated domain: rotating each packed row back gives the rows
      // above bit for bit; KIVI's exact residual rows, rotated forward by the read, come back to
      // rounding.
      for (const KvSide side : {KvSide::kKey, KvSide::kValue}) {
        const int span = cache.rotation_span(side, 0);
        if (span == 0) continue;
        std::vector<float> plain(n * kDim);
        for (int h = 0; h < kHeads; ++h) {
          cache.read(side, h, 0, n, plain.data(), scratch);
          cache.read(side, h, 0, n, head_rows.data(), scratch, /*rotated_domain=*/true);
          for (size_t t = 0; t < n; ++t) {
            hadamard_transform_spans(head_rows.data() + t * kDim, kDim, span);
          }
          const size_t packed = cache.n_committed();
          ASSERT_EQ(std::memcmp(head_rows.data(), plain.data(), packed * kDim * sizeof(float)), 0)
              << (side == KvSide::kKey ? "key" : "value") << " head " << h << " of " << n;
          for (size_t i = packed * kDim; i < n * kDim; ++i) {
            ASSERT_NEAR(head_rows[i], plain[i], 1e-6f * (1.0f + std::abs(plain[i])))
                << "staged value " << i << " head " << h;
          }
        }
      }
      // Attention over the pages = attention over an exact cache of the round-trip rows: bit for
      // bit, or, in a decode step that reads a side in its rotated domain, to rounding.
      LayerKvCache exact(3, {kHeads, kDim, 0}, true, {}, {});
      exact.append(oracle.keys().data(), oracle.values().data(), n, kWidth);
      exact.commit();
      const std::vector<float> q = random_rows(step * 2);  // q_width = 2 * kWidth
      std::vector<float> a(step * q_width), b(step * q_width);
      attend_chunk(q.data(), q_width, step, pos, cache, shape, a.data(), q_width);
      attend_chunk(q.data(), q_width, step, pos, exact, shape, b.data(), q_width);
      if (step > 1 || (cache.rotation_span(KvSide::kKey, 0) == 0 &&
                       cache.rotation_span(KvSide::kValue, 0) == 0)) {
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "at " << n;
      } else {
        for (size_t i = 0; i < a.size(); ++i) {
          ASSERT_NEAR(a[i], b[i], 2e-6f * (1.0f + std::abs(b[i]))) << "at " << n << ", " << i;
        }
      }
      if (!c.chunk_attends_quantized) {
        cache.commit();
        oracle.commit();
      }
      pos += step;
    }
  }
  EXPECT_EQ(cache.n_tokens(), 155u);
}

// One format of every family, per token; KIVI with an int key, a plain key and a per-channel key
// format; the exact-chunk prefill.
INSTANTIATE_TEST_SUITE_P(
    EveryFamily, PackedCache,
    ::testing::Values(Case{"f16/bf16"}, Case{"int4/int2"}, Case{"int8_g64/int4_g128"},
                      Case{"q8_0/q4_0"}, Case{"q4_1/q5_0"}, Case{"q5_1/iq4_nl"},
                      Case{"q4_0_had/iq4_nl_had"}, Case{"q8_0_had64/q5_1_had64"},
                      Case{"q6_0/q6_0_had"}, Case{"q6_0_had64/q6_0"}, Case{"mxfp4/mxfp6_e2m3"},
                      Case{"mxfp8_e4m3/nvfp4"}, Case{"fp8_e4m3/fp8_e5m2"}, Case{"tq_mse3/tq_int4"},
                      Case{"tq_fp8/tq_int3"}, Case{"tq_mse4/int4_per_token_head"},
                      Case{"fp8_per_token_head/int8_per_token_head"}, Case{"int4_kivi/int4"},
                      Case{"int2_kivi/q4_0"}, Case{"int2_kivi/tq_mse3"},
                      Case{"int4_kivi/iq4_nl_had"}, Case{"KV4", QuantMode::kKivi},
                      Case{"f16/int2", QuantMode::kKivi}, Case{"KV4", QuantMode::kKivi, false},
                      Case{"q4_0/q4_0", QuantMode::kPerToken, false}),
    case_name);

TEST(PackedCache, HoldsThePlansBytesAndFreesPagesBehindAWindow) {
  QuantSettings settings;
  const KvPair q4 = KvPair::parse("q4_0/q4_0");
  LayerKvCache cache(0, {kHeads, kDim, 64}, false, q4, settings);
  std::vector<float> rows(kWidth * 32, 0.5f);
  for (int chunk = 0; chunk < 8; ++chunk) {
    cache.append(rows.data(), rows.data(), 32, kWidth);
    cache.commit();
  }
  // 256 tokens as q4_0 pages (36 bytes per head-row for K and V) under a 64-token window: the last
  // chunk's first query (224) reads keys from 161 on, so the pages from token 160 stay.
  const size_t page = 32 * kHeads * 36;
  EXPECT_EQ(cache.first_held_token(), 160u);
  EXPECT_EQ(cache.bytes_held(), 3 * 2 * page);
  std::vector<float> out(kDim), scratch;
  EXPECT_THROW(cache.read(KvSide::kKey, 0, 159, 1, out.data(), scratch), Error);
  cache.read(KvSide::kKey, 0, 161, 1, out.data(), scratch);

  LayerKvCache unbounded(0, {kHeads, kDim, 0}, false, q4, settings);
  for (int chunk = 0; chunk < 8; ++chunk) {
    unbounded.append(rows.data(), rows.data(), 32, kWidth);
    unbounded.commit();
  }
  EXPECT_EQ(unbounded.first_held_token(), 0u);
  EXPECT_EQ(unbounded.bytes_held(), 8 * 2 * page);
  // A prefill's staged rows are given back once packed.
  std::vector<float> long_rows(kWidth * 4096, 0.25f);
  unbounded.append(long_rows.data(), long_rows.data(), 4096, kWidth);
  unbounded.commit();
  EXPECT_EQ(unbounded.bytes_held(), (8 + 128) * 2 * page);
}

TEST(PackedCache, RefusesWhatItCannotHold) {
  EXPECT_THROW(LayerKvCache(0, {kHeads, 8, 0}, false, KvPair::parse("q4_0/q4_0"), {}), Error);
  EXPECT_THROW(LayerKvCache(0, {kHeads, kDim, 0}, false, KvPair::parse("slot:134"), {}), Error);
  EXPECT_THROW(LayerKvCache(0, {kHeads, kDim, 0}, false, KvPair::parse("q4_0/int4_kivi"), {}),
               Error);
}

// A layer whose two KV heads take different pairs returns, for each head, bit for bit what a
// layer of that head's pair returns for it, at every step of a prefill-then-decode schedule (a
// KIVI head keeping its residual window beside a per-token one, a rotated one beside a plain
// one); attention over it equals, row for row, attention over those one-pair layers; its pages
// hold each run's bytes.
TEST(PackedCache, PerHeadLayersReadEachHeadAsALayerOfItsPair) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const auto random_rows = [&](size_t n) {
    std::vector<float> r(n * kWidth);
    for (float& x : r) x = dist(rng);
    return r;
  };
  QuantSettings settings;
  const AttentionShape shape{.n_heads = 2 * kHeads, .n_kv_heads = kHeads, .head_dim = kDim};
  const size_t q_width = 2 * kWidth;
  for (const auto& [a, b] : {std::pair{"q8_0/q4_0", "int4_kivi/tq_mse3"},
                             std::pair{"q4_0_had/iq4_nl", "q4_0/q8_0_had64"},
                             std::pair{"tq_mse4/int4", "int2_kivi/q5_0"}}) {
    const std::vector<KvPair> heads{KvPair::parse(a), KvPair::parse(b)};
    LayerKvCache mixed(1, {kHeads, kDim, 0}, heads, settings);
    ASSERT_TRUE(mixed.per_head());
    ASSERT_EQ(mixed.n_head_runs(), 2);
    EXPECT_EQ(mixed.head_run_layout(1).n_kv_heads(), 1);
    EXPECT_EQ(mixed.head_run_layout(1).pair(), heads[1]);
    EXPECT_THROW((void)mixed.head_run_layout(2), Error);
    std::vector<LayerKvCache> single;
    for (const KvPair& p : heads)
      single.emplace_back(1, KvLayerGeometry{kHeads, kDim, 0}, false, p, settings);
    size_t pos = 0;
    for (const size_t step :
         {size_t{37}, size_t{64}, size_t{1}, size_t{1}, size_t{30}, size_t{1}}) {
      const std::vector<float> k = random_rows(step), v = random_rows(step);
      mixed.append(k.data(), v.data(), step, kWidth);
      mixed.commit();
      for (LayerKvCache& c : single) {
        c.append(k.data(), v.data(), step, kWidth);
        c.commit();
      }
      pos += step;
      std::vector<float> got(pos * kDim), want(pos * kDim), scratch(mixed.read_scratch_floats());
      std::vector<float> scratch1(64 * kDim);
      for (const KvSide side : {KvSide::kKey, KvSide::kValue}) {
        for (int h = 0; h < kHeads; ++h) {
          const LayerKvCache& one = single[static_cast<size_t>(h)];
          EXPECT_EQ(mixed.rotation_span(side, h), one.rotation_span(side, h));
          scratch1.resize(one.read_scratch_floats());
          mixed.read(side, h, 0, pos, got.data(), scratch);
          one.read(side, h, 0, pos, want.data(), scratch1);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
              << a << " | " << b << " head " << h << " at " << pos;
        }
      }
      const std::vector<float> q = random_rows(step * 2);
      std::vector<float> out(step * q_width);
      attend_chunk(q.data(), q_width, step, pos - step, mixed, shape, out.data(), q_width);
      for (int h = 0; h < kHeads; ++h) {
        std::vector<float> ref(step * q_width);
        attend_chunk(q.data(), q_width, step, pos - step, single[static_cast<size_t>(h)], shape,
                     ref.data(), q_width);
        // KV head h serves query heads 2h and 2h + 1: columns [2h * kDim, (2h + 2) * kDim).
        for (size_t t = 0; t < step; ++t) {
          const size_t col = static_cast<size_t>(2 * h) * kDim;
          ASSERT_EQ(std::memcmp(out.data() + t * q_width + col, ref.data() + t * q_width + col,
                                2 * kDim * sizeof(float)),
                    0)
              << a << " | " << b << " head " << h << " row " << t << " at " << pos;
        }
      }
    }
    // What it holds: each run's pages over its heads (half a layer of each pair).
    size_t pages = 0;
    for (const LayerKvCache& c : single) pages += c.bytes_held();
    EXPECT_GT(mixed.bytes_held(), 0u);
    EXPECT_LE(mixed.bytes_held(), pages);
  }
}

TEST(PackedCache, PerHeadOptionsKeepLayersWhoseHeadsAgreeAsOnePair) {
  const KvPair q8 = KvPair::parse("q8_0/q8_0"), q4 = KvPair::parse("q4_0/q4_0");
  const KvCacheOptions same = KvCacheOptions::per_head({{q8, q8}, {q4, q4}}, {});
  EXPECT_TRUE(same.head_pairs.empty());
  EXPECT_EQ(same.pairs, (std::vector<KvPair>{q8, q4}));
  const KvCacheOptions mixed = KvCacheOptions::per_head({{q8, q8}, {q4, q8}}, {});
  ASSERT_EQ(mixed.head_pairs.size(), 2u);
  EXPECT_TRUE(mixed.head_pairs[0].empty());
  EXPECT_EQ(mixed.layer_head_pairs(1, 2), (std::vector<KvPair>{q4, q8}));
  EXPECT_EQ(mixed.layer_head_pairs(0, 2), (std::vector<KvPair>{q8, q8}));
  EXPECT_THROW(LayerKvCache(0, {kHeads, kDim, 0}, std::vector<KvPair>{q8}, {}), Error);
}

}  // namespace
}  // namespace kvplan
