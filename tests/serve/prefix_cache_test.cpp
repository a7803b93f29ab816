// A prefix restored through the runtime gives exactly the logits and greedy tokens a computed one
// gives, whichever tier it comes from (device, host, disk: each forced, each proved read by the
// runtime's stats); neighbouring chunks and guard bytes stay untouched; a corrupt chunk or one of
// another plan is refused and its tokens computed instead.
#include "serve/prefix_cache.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "stories_serving_fixture.h"
#include "test_paths.h"

namespace kvplan::serve {
namespace {

namespace fs = std::filesystem;

constexpr size_t kChunk = 32;

// What a request produced: the last prompt token's logits, then each decode step's.
struct RequestRun {
  std::vector<RowMatrix> logits;
  std::vector<int32_t> tokens;
  size_t restored = 0;
  std::vector<Tier> tiers;
};

class PrefixReuse : public StoriesServingTest {
 protected:
  void SetUp() override {
    StoriesServingTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::unique_ptr<Tokenizer> tok = load_model_tokenizer(model_path());
    // A long shared history, then two different last turns.
    std::string history;
    for (int i = 0; i < 6; ++i) {
      history += "Once upon a time, a little girl named Lily found a red ball in the park. ";
    }
    shared_ = tok->encode(history, {.add_bos = true});
    ASSERT_GE(shared_.size(), 4 * kChunk);
    shared_.resize(4 * kChunk);
    first_ = second_ = shared_;
    for (const int32_t t : tok->encode(" She was happy.", {.add_bos = false})) first_.push_back(t);
    for (const int32_t t : tok->encode(" The sun was hot.", {.add_bos = false})) {
      second_.push_back(t);
    }
    dir_ = fs::temp_directory_path() /
           ("kvplan_prefix_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // device_chunks / host_chunks: tier capacities in chunks; 0 host chunks = the default.
  RuntimeOptions options(size_t device_chunks, size_t host_chunks, const Plan& plan) const {
    const PlanLayout layout(plan, {.chunk_tokens = kChunk});
    RuntimeOptions o;
    o.backend = make_host_standin_backend({.lock_host_pages = false});
    o.chunk_tokens = kChunk;
    o.device_capacity_bytes = device_chunks * layout.chunk_bytes();
    o.host_capacity_bytes = host_chunks * stored_chunk_bytes(layout);
    o.disk_dir = dir_;
    o.disk_fsync = false;
    return o;
  }

  // One request: restore what `prefixes` holds (when given), prefill the rest in chunk-aligned
  // pieces, decode 6 greedy tokens, store the finished chunks.
  RequestRun request(const std::vector<int32_t>& prompt, PrefixCache* prefixes) const {
    KvCache cache(weights_->config, cache_options(plan_));
    RequestRun run;
    if (prefixes != nullptr) {
      const PrefixRestore r = prefixes->restore(prompt, cache);
      run.restored = r.tokens;
      run.tiers = r.tiers;
    }
    run.logits.push_back(prefill_aligned(*model_, prompt, run.restored, cache, kChunk));
    for (int step = 0; step < 6; ++step) {
      Eigen::Index next = 0;
      run.logits.back().row(0).maxCoeff(&next);
      run.tokens.push_back(static_cast<int32_t>(next));
      const int32_t one[1] = {static_cast<int32_t>(next)};
      run.logits.push_back(model_->forward(one, cache, nullptr, {.last_logits_only = true}));
    }
    if (prefixes != nullptr) (void)prefixes->store(prompt, cache);
    return run;
  }

  static void expect_same(const RequestRun& computed, const RequestRun& restored) {
    ASSERT_EQ(computed.logits.size(), restored.logits.size());
    for (size_t i = 0; i < computed.logits.size(); ++i) {
      ASSERT_EQ(computed.logits[i].size(), restored.logits[i].size());
      EXPECT_EQ(std::memcmp(computed.logits[i].data(), restored.logits[i].data(),
                            static_cast<size_t>(computed.logits[i].size()) * sizeof(float)),
                0)
          << "logits of step " << i;
    }
    EXPECT_EQ(computed.tokens, restored.tokens);
  }

  void expect_every_tier_restores_the_computed_logits();

  std::vector<int32_t> shared_, first_, second_;
  fs::path dir_;
};

TEST_F(PrefixReuse, RestoredFromEachTierGivesTheComputedLogits) {
  // Per token, and KIVI (keys per channel, an exact residual window outside the stored chunks).
  QuantSettings kivi;
  kivi.mode = QuantMode::kKivi;
  for (const Plan& plan :
       {plan_, plan_of_pairs(plan_.model, plan_.pairs(), kivi),
        plan_of_pairs(plan_.model,
                      std::vector<KvPair>(plan_.layers.size(), KvPair::parse("int2_kivi/int8")),
                      QuantSettings{})}) {
    SCOPED_TRACE(plan.layers[0].pair.name() +
                 (plan.quantization.mode == QuantMode::kKivi ? " kivi" : ""));
    plan_ = plan;
    expect_every_tier_restores_the_computed_logits();
  }
}

TEST_F(PrefixReuse, PerKvHeadPlansRestoredFromEachTierGiveTheComputedLogits) {
  // A committed per-KV-head plan (FP8 scales per head, KIVI keys, TurboQuant values; heads of a
  // layer on different formats), and one whose layer mixes a KIVI run, which keeps a residual
  // window outside the stored chunks, with per-token runs. Each head run's pages travel through
  // the runtime in their own transfer groups and come back into the cache's runs byte for byte.
  Plan committed =
      read_plan(fs::path(KVPLAN_SOURCE_DIR) / "data/reference/stories260k/per-head/plan-320.json");
  ASSERT_TRUE(committed.per_head());
  Plan mixed = plan_;
  const KvPair per_token = KvPair::parse("int8/int4"), kivi = KvPair::parse("int2_kivi/int8");
  const int heads = plan_.model.geometry.layers[0].n_kv_heads;
  ASSERT_GE(heads, 3);
  for (const size_t l : {size_t{0}, size_t{3}}) {
    mixed.layers[l].heads = std::vector<KvPair>(static_cast<size_t>(heads), per_token);
    mixed.layers[l].heads[1] = mixed.layers[l].heads[2] = kivi;
    mixed.layers[l].pair =
        widest_pair_of_heads(mixed.layers[l].heads, mixed.model.geometry.layers[l],
                             mixed.quantization, static_cast<int>(l));
  }
  for (const Plan& plan : {committed, mixed}) {
    SCOPED_TRACE(plan.layers[0].per_head() ? "mixed KIVI and per-token heads" : "committed");
    plan_ = plan;
    const PlanLayout layout(plan_, {.chunk_tokens = kChunk});
    EXPECT_GT(layout.groups().size(), 1u);
    expect_every_tier_restores_the_computed_logits();
  }
}

void PrefixReuse::expect_every_tier_restores_the_computed_logits() {
  const RequestRun computed = request(second_, nullptr);
  // Device: the chunks stay there. Host: their device copies are dropped. Disk: one host slot,
  // so storing spills them to disk, and their device copies are dropped.
  struct Forced {
    Tier tier;
    size_t host_chunks;
  };
  for (const Forced f :
       {Forced{Tier::kDevice, 16}, Forced{Tier::kHost, 16}, Forced{Tier::kDisk, 1}}) {
    SCOPED_TRACE(std::string(tier_name(f.tier)));
    fs::remove_all(dir_);
    PrefixCache prefixes(plan_, options(16, f.host_chunks, plan_));
    const RequestRun first = request(first_, &prefixes);
    EXPECT_EQ(first.restored, 0u);
    prefixes.runtime().flush();
    if (f.tier == Tier::kDisk) {
      // Another conversation's chunk takes the one host slot: the last of ours spills too.
      std::vector<int32_t> unrelated(first_.rbegin(), first_.rend());
      (void)request(unrelated, &prefixes);
      prefixes.runtime().flush();
    }
    if (f.tier != Tier::kDevice) {
      const std::vector<uint32_t> ids(first_.begin(), first_.end());
      for (const uint64_t key : prefixes.runtime().keys(ids)) {
        ASSERT_TRUE(prefixes.runtime().evict_from(key, Tier::kDevice));
      }
    }
    const RuntimeStats before = prefixes.stats();
    const RequestRun restored = request(second_, &prefixes);
    const RuntimeStats after = prefixes.stats();
    // The second prompt shares its first 4 chunks with the first, then its own last turn.
    ASSERT_EQ(restored.restored, 4 * kChunk);
    EXPECT_EQ(restored.tiers, std::vector<Tier>(4, f.tier));
    expect_same(computed, restored);
    switch (f.tier) {
      case Tier::kDevice:
        EXPECT_EQ(after.hits_device - before.hits_device, 4u);
        EXPECT_EQ(after.bytes_host_to_device, before.bytes_host_to_device);
        break;
      case Tier::kHost:
        EXPECT_EQ(after.hits_host - before.hits_host, 4u);
        EXPECT_GT(after.bytes_host_to_device, before.bytes_host_to_device);
        EXPECT_EQ(after.bytes_from_disk, before.bytes_from_disk);
        break;
      default:
        EXPECT_EQ(after.hits_disk - before.hits_disk, 4u);
        EXPECT_GT(after.bytes_from_disk, before.bytes_from_disk);
        break;
    }
    EXPECT_EQ(prefixes.runtime().count_guard_violations(), 0u);
  }
}

TEST_F(PrefixReuse, NeighbouringChunksStayAsTheyWere) {
  PrefixCache prefixes(plan_, options(16, 16, plan_));
  (void)request(first_, &prefixes);
  prefixes.runtime().flush();
  // The 4th chunk of the first prompt is on the device and not part of the restore below.
  const std::vector<uint32_t> ids(first_.begin(), first_.end());
  const uint64_t fourth = prefixes.runtime().keys(ids)[3];
  const auto snapshot = [&] {
    const LoadResult l = prefixes.runtime().load(ids, 4).get();
    std::vector<std::byte> bytes;
    for (const DeviceChunk& d : l.chunks) {
      if (d.key == fourth) bytes.assign(d.data, d.data + d.bytes);
      prefixes.runtime().release(d);
    }
    return bytes;
  };
  const std::vector<std::byte> before = snapshot();
  ASSERT_FALSE(before.empty());
  (void)request(second_, &prefixes);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(prefixes.runtime().count_guard_violations(), 0u);
}

TEST_F(PrefixReuse, CorruptChunkIsRefusedAndRecomputed) {
  const RequestRun computed = request(second_, nullptr);
  PrefixCache prefixes(plan_, options(16, 16, plan_));
  (void)request(first_, &prefixes);
  prefixes.runtime().flush();
  const std::vector<uint32_t> ids(second_.begin(), second_.end());
  const std::vector<uint64_t> keys = prefixes.runtime().keys(ids);
  for (const uint64_t key : keys) (void)prefixes.runtime().evict_from(key, Tier::kDevice);
  // Chunk 1's host copy gets one payload byte flipped (its header stays valid).
  std::span<std::byte> stored = prefixes.runtime().host_object_bytes_for_testing(keys[1]);
  ASSERT_FALSE(stored.empty());
  stored[stored.size() - 7] ^= std::byte{0x40};
  const RuntimeStats before = prefixes.stats();
  const RequestRun restored = request(second_, &prefixes);
  EXPECT_EQ(restored.restored, kChunk);  // chunk 0 only: the refusal ends the prefix
  EXPECT_EQ(prefixes.stats().refusals - before.refusals, 1u);
  expect_same(computed, restored);
}

TEST_F(PrefixReuse, ChunkOfAnotherPlanIsRefused) {
  const RequestRun computed = request(second_, nullptr);
  Plan other = plan_;
  other.layers[1].pair = KvPair::parse("int4/int4");
  fs::path other_file;
  {
    PrefixCache writer(other, options(16, 1, other));
    const Plan kept = plan_;
    plan_ = other;
    (void)request(first_, &writer);
    plan_ = kept;
    writer.runtime().flush();
    const std::vector<uint32_t> ids(first_.begin(), first_.end());
    other_file = *writer.runtime().disk_path_for_testing(writer.runtime().keys(ids)[0]);
    ASSERT_TRUE(fs::exists(other_file));
  }
  PrefixCache prefixes(plan_, options(16, 1, plan_));
  (void)request(first_, &prefixes);
  prefixes.runtime().flush();
  const std::vector<uint32_t> ids(second_.begin(), second_.end());
  for (const uint64_t key : prefixes.runtime().keys(ids)) {
    (void)prefixes.runtime().evict_from(key, Tier::kDevice);
  }
  const std::optional<fs::path> ours =
      prefixes.runtime().disk_path_for_testing(prefixes.runtime().keys(ids)[0]);
  ASSERT_TRUE(ours && fs::exists(*ours));
  // The other plan's bytes filed under this plan's chunk 0.
  fs::copy_file(other_file, *ours, fs::copy_options::overwrite_existing);
  const RuntimeStats before = prefixes.stats();
  const RequestRun restored = request(second_, &prefixes);
  EXPECT_EQ(restored.restored, 0u);
  EXPECT_EQ(prefixes.stats().refusals - before.refusals, 1u);
  expect_same(computed, restored);
}

// A sliding-window layer frees the pages behind its window while a long prompt is prefilled, so
// the prompt's first chunks are gone by its end: prefill_storing stores each chunk as soon as it
// is computed, and the restored prefix still gives the computed logits.
TEST(PrefixReuseSlidingWindow, ChunksStoredAsComputedSurviveTheWindow) {
  const fs::path dir = fs::path(KVPLAN_SOURCE_DIR) / "tests" / "fixtures" / "hf" / "gemma2";
  const ModelWeights weights = load_model_weights(dir);
  const Transformer model(weights);
  const KvModel kv = kv_model(weights);
  ASSERT_GT(kv.geometry.layers[0].sliding_window, 0);
  ASSERT_LT(kv.geometry.layers[0].sliding_window, static_cast<int>(kChunk));
  const Plan plan =
      plan_of_pairs(kv, std::vector<KvPair>(kv.geometry.layers.size(), KvPair::parse("int8/int4")),
                    QuantSettings{});
  std::vector<int32_t> prompt;
  for (int i = 0; i < 4 * static_cast<int>(kChunk) + 5; ++i) {
    prompt.push_back((i * 7 + 3) % weights.config.vocab_size);
  }
  const PlanLayout layout(plan, {.chunk_tokens = kChunk});
  RuntimeOptions o;
  o.backend = make_host_standin_backend({.lock_host_pages = false});
  o.chunk_tokens = kChunk;
  o.device_capacity_bytes = 8 * layout.chunk_bytes();
  o.host_capacity_bytes = 8 * stored_chunk_bytes(layout);
  PrefixCache prefixes(plan, o);

  KvCache computed(weights.config, cache_options(plan));
  const RowMatrix computed_logits = prefixes.prefill_storing(model, prompt, 0, computed);
  // The window freed chunk 0's pages: storing the finished prompt now would find nothing.
  EXPECT_FALSE(computed.layer(0).holds_page(0));
  EXPECT_EQ(prefixes.store(prompt, computed), 0u);

  KvCache restored(weights.config, cache_options(plan));
  const PrefixRestore r = prefixes.restore(prompt, restored);
  EXPECT_EQ(r.tokens, 4 * kChunk);
  const RowMatrix restored_logits = prefill_aligned(model, prompt, r.tokens, restored, kChunk);
  ASSERT_EQ(computed_logits.size(), restored_logits.size());
  EXPECT_EQ(std::memcmp(computed_logits.data(), restored_logits.data(),
                        static_cast<size_t>(computed_logits.size()) * sizeof(float)),
            0);
}

}  // namespace
}  // namespace kvplan::serve
