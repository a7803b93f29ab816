// The live engine serves what the harness computes: a request alone gets the greedy tokens of a
// plain decode over the same packed cache; requests served together all finish; a cancelled or
// stopped request frees its memory; drain() finishes what was queued and refuses what comes after.
#include "serve/engine.h"

#include <chrono>
#include <memory>

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/model_weights.h"
#include "serve/prefix_cache.h"
#include "stories_serving_fixture.h"
#include "test_paths.h"

namespace kvplan::serve {
namespace {

constexpr size_t kChunk = 32;

GenerationRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens,
                                 std::vector<int32_t> stop_ids = {}) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.stop_ids = std::move(stop_ids);
  return r;
}

class EngineTest : public StoriesServingTest {
 protected:
  void SetUp() override {
    StoriesServingTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
  }
  EngineOptions options(uint64_t kv_memory = 64 << 20) const {
    EngineOptions o;
    o.kv_memory_bytes = kv_memory;
    o.tiers.chunk_tokens = kChunk;
    o.tiers.longest_prompt_tokens = 512;
    o.tiers.host_memory_bytes = 8 << 20;
    return o;
  }
  static std::vector<int32_t> prompt(size_t n, int32_t salt) {
    std::vector<int32_t> p{1};
    for (size_t i = 1; i < n; ++i) p.push_back(static_cast<int32_t>((i * 13 + salt) % 500 + 3));
    return p;
  }
  // Greedy decoding the plain way: chunk-aligned prefill, then one token at a time.
  std::vector<int32_t> reference(const std::vector<int32_t>& p, int64_t n) const {
    KvCache cache(weights_->config, cache_options(plan_));
    RowMatrix logits = prefill_aligned(*model_, p, 0, cache, kChunk);
    std::vector<int32_t> out;
    for (int64_t i = 0; i < n; ++i) {
      Eigen::Index best = 0;
      logits.row(logits.rows() - 1).maxCoeff(&best);
      out.push_back(static_cast<int32_t>(best));
      const int32_t one[1] = {out.back()};
      logits = model_->forward(one, cache, nullptr, {.last_logits_only = true});
    }
    return out;
  }
};

TEST_F(EngineTest, ARequestAloneGetsThePlainGreedyTokens) {
  Engine engine(*model_, plan_, options());
  for (const size_t n : {5u, 40u, 100u}) {
    const std::vector<int32_t> p = prompt(n, static_cast<int32_t>(n));
    const auto s = engine.submit(greedy_request(p, 12));
    const GenerationStream::Snapshot snap = s->wait_finished();
    EXPECT_EQ(snap.finish, FinishReason::kLength);
    EXPECT_EQ(snap.tokens, reference(p, 12)) << n << " prompt tokens";
  }
  // The same prompt again: its whole chunks come back from the runtime, the tokens do not change.
  const std::vector<int32_t> p = prompt(100, 100);
  const GenerationStream::Snapshot again = engine.submit(greedy_request(p, 12))->wait_finished();
  EXPECT_EQ(again.restored_tokens, 96);
  EXPECT_EQ(again.tokens, reference(p, 12));
  engine.drain();  // the worker's last counter updates come after the streams end
  const EngineCounters c = engine.counters();
  EXPECT_EQ(c.requests, 4u);
  EXPECT_EQ(c.finished_length, 4u);
  EXPECT_EQ(c.restored_tokens, 96u);
  EXPECT_EQ(c.generated_tokens, 48u);
  EXPECT_EQ(c.ttft_count, 4u);
  EXPECT_GT(c.runtime.hits_device + c.runtime.hits_host, 0u);
}

TEST_F(EngineTest, RequestsServedTogetherAllFinishAndFreeTheirMemory) {
  // Room for about three requests at once: the others wait for memory.
  const uint64_t one = Engine(*model_, plan_, options()).reservation(60 + 20);
  Engine engine(*model_, plan_, options(3 * one + one / 2));
  std::vector<std::shared_ptr<GenerationStream>> streams;
  for (int i = 0; i < 8; ++i) streams.push_back(engine.submit(greedy_request(prompt(60, i), 20)));
  for (const auto& s : streams) {
    const GenerationStream::Snapshot snap = s->wait_finished();
    EXPECT_EQ(snap.finish, FinishReason::kLength);
    EXPECT_EQ(snap.tokens.size(), 20u);
  }
  engine.drain();
  const EngineCounters c = engine.counters();
  EXPECT_EQ(c.finished_length, 8u);
  EXPECT_EQ(c.running, 0u);
  EXPECT_EQ(c.waiting, 0u);
  EXPECT_EQ(c.kv_used_bytes, 0u);
}

TEST_F(EngineTest, AStopTokenEndsTheRequestWithoutBeingReturned) {
  Engine engine(*model_, plan_, options());
  const std::vector<int32_t> p = prompt(20, 5);
  const std::vector<int32_t> greedy = reference(p, 6);
  const GenerationStream::Snapshot snap =
      engine.submit(greedy_request(p, 6, {greedy[3]}))->wait_finished();
  EXPECT_EQ(snap.finish, FinishReason::kStop);
  // Up to the first occurrence of the stop token.
  const auto first = std::find(greedy.begin(), greedy.end(), greedy[3]);
  EXPECT_EQ(snap.tokens, std::vector<int32_t>(greedy.begin(), first));
}

TEST_F(EngineTest, ACancelledRequestEndsAndFreesItsSequence) {
  // Memory for one request: the second waits behind the first (hundreds of decode steps) and is
  // cancelled while it waits; the first is cancelled while it runs.
  const uint64_t one = Engine(*model_, plan_, options()).reservation(20 + 450);
  Engine engine(*model_, plan_, options(one + one / 2));
  const auto running = engine.submit(greedy_request(prompt(20, 1), 450));
  const auto waiting = engine.submit(greedy_request(prompt(20, 2), 450));
  waiting->cancel();
  (void)running->wait(0, std::chrono::seconds(60));
  running->cancel();
  const GenerationStream::Snapshot w = waiting->wait_finished();
  EXPECT_EQ(w.finish, FinishReason::kCancelled);
  EXPECT_TRUE(w.tokens.empty());
  const GenerationStream::Snapshot r = running->wait_finished();
  // (It may have finished its 450 tokens before the cancel landed: then it ended by length.)
  EXPECT_TRUE(r.finish == FinishReason::kCancelled || r.tokens.size() == 450u);
  engine.drain();
  const EngineCounters c = engine.counters();
  EXPECT_EQ(c.cancelled + c.finished_length, 2u);
  EXPECT_GE(c.cancelled, 1u);
  EXPECT_EQ(c.kv_used_bytes, 0u);
  EXPECT_EQ(c.running + c.waiting, 0u);
}

TEST_F(EngineTest, RefusesWhatCanNeverFitAndWhatComesAfterDrain) {
  Engine engine(*model_, plan_, options(64 << 10));
  EXPECT_THROW((void)engine.submit(greedy_request(prompt(400, 1), 100)), Error);
  EXPECT_THROW((void)engine.submit(greedy_request({}, 1)), Error);
  EXPECT_THROW((void)engine.submit(greedy_request(prompt(4, 1), 0)), Error);
  std::vector<std::shared_ptr<GenerationStream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(engine.submit(greedy_request(prompt(10, i), 8)));
  engine.drain();
  for (const auto& s : streams) EXPECT_EQ(s->wait_finished().finish, FinishReason::kLength);
  EXPECT_THROW((void)engine.submit(greedy_request(prompt(4, 1), 2)), Error);
}

}  // namespace
}  // namespace kvplan::serve
