// The workload is the same for every configuration, token for token; the serving loop completes
// every request when memory allows, admits fewer at once and makes requests wait when it does not,
// refuses a request that can never fit, and reuses a returning user's prefix from the runtime.
#include "serve/serving_loop.h"

#include <memory>
#include <numeric>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/kv_bytes.h"
#include "model/model_weights.h"
#include "stories_serving_fixture.h"
#include "test_paths.h"

namespace kvplan::serve {
namespace {

std::vector<int32_t> counting_text(size_t n, int32_t vocab) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(vocab));
  return t;
}

WorkloadOptions small_workload() {
  WorkloadOptions w;
  w.users = 3;
  w.rounds = 2;
  w.system_tokens = 32;
  w.document_tokens = 64;
  w.question_tokens = 8;
  w.answer_tokens = 4;
  w.user_interval_s = 0.01;
  w.think_time_s = 0.01;
  return w;
}

TEST(Workload, SameOptionsSameRequestsAndEachRoundExtendsTheLast) {
  const std::vector<int32_t> text = counting_text(5000, 512);
  const Workload a = make_workload(small_workload(), text, 1);
  const Workload b = make_workload(small_workload(), text, 1);
  ASSERT_EQ(a.turns.size(), 6u);
  for (size_t i = 0; i < a.turns.size(); ++i) EXPECT_EQ(a.turns[i].prompt, b.turns[i].prompt);
  EXPECT_EQ(a.user_start_s, b.user_start_s);
  for (int u = 0; u < 3; ++u) {
    const std::vector<int32_t>& first = a.turn(u, 0).prompt;
    const std::vector<int32_t>& second = a.turn(u, 1).prompt;
    EXPECT_EQ(first.size(), 1u + 32 + 64 + 8);
    // Round 2 = round 1 + its reference answer + a new question.
    EXPECT_EQ(second.size(), first.size() + 4 + 8);
    EXPECT_TRUE(std::equal(first.begin(), first.end(), second.begin()));
  }
  WorkloadOptions reused = small_workload();
  reused.document_reuse = 1;
  const Workload r = make_workload(reused, text, 1);
  for (int u = 1; u < 3; ++u) {
    // Every document is the first user's: the prompts agree up to the first question.
    EXPECT_TRUE(std::equal(r.turn(0, 0).prompt.begin(), r.turn(0, 0).prompt.begin() + 97,
                           r.turn(u, 0).prompt.begin()));
  }
  WorkloadOptions bad = small_workload();
  bad.users = 0;
  EXPECT_THROW(make_workload(bad, text, 1), Error);
  EXPECT_THROW(make_workload(small_workload(), counting_text(10, 512), 1), Error);
}

class ServingLoop : public StoriesServingTest {
 protected:
  void SetUp() override {
    StoriesServingTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    WorkloadOptions w = small_workload();
    w.user_interval_s = 0;  // every user at once: how many run together depends on memory only
    workload_ = make_workload(w, counting_text(5000, 512), 1);
  }
  // The KV memory one request needs at most.
  uint64_t largest_reservation() const {
    uint64_t most = 0;
    for (const Turn& t : workload_.turns) {
      most = std::max(most, kv_cache_bytes(plan_.model.geometry, plan_.pairs(), plan_.quantization,
                                           static_cast<int64_t>(t.prompt.size()) + 4, 1));
    }
    return most;
  }
  ServeOptions options(uint64_t kv_memory) const {
    ServeOptions o;
    o.kv_memory_bytes = kv_memory;
    o.host_memory_bytes = 1 << 20;
    o.chunk_tokens = 32;
    o.quality_samples = 2;
    return o;
  }

  Workload workload_;
};

TEST_F(ServingLoop, AmpleMemoryCompletesEveryRequestAndReusesPrefixes) {
  const ServeResult r =
      run_serving(*model_, plan_, "int8/int4", workload_, options(100 * largest_reservation()));
  const ServeSummary s = summarize(r);
  EXPECT_EQ(s.requests, 6);
  EXPECT_EQ(s.completed, 6);
  EXPECT_EQ(s.rejected, 0);
  for (const RequestRecord& rec : r.requests) {
    EXPECT_EQ(rec.token_s.size(), 4u);
    EXPECT_GE(rec.first_token_s, rec.arrival_s);
    EXPECT_EQ(rec.restored_tokens + rec.computed_tokens, rec.prompt_tokens);
    // A returning user's prompt starts with what its first round stored.
    if (rec.round == 1) {
      EXPECT_GE(rec.restored_tokens, 96);
    }
  }
  EXPECT_GT(s.restored_tokens, 0);
  EXPECT_GT(r.runtime.hits_device + r.runtime.hits_host, 0u);
  EXPECT_EQ(r.quality_positions, 2 * 4);
  EXPECT_GE(r.served_mean_kl, 0.0);
  EXPECT_LE(s.ttft_p50_s, s.ttft_p95_s);
}

TEST_F(ServingLoop, TightMemoryServesOneAtATimeAndRefusesWhatCannotFit) {
  const uint64_t one = largest_reservation();
  const ServeResult roomy = run_serving(*model_, plan_, "x", workload_, options(100 * one));
  const ServeResult tight = run_serving(*model_, plan_, "x", workload_, options(one));
  EXPECT_EQ(summarize(tight).completed, 6);
  EXPECT_EQ(tight.most_running, 1);
  EXPECT_EQ(roomy.most_running, 3);  // every user arrives at once and all fit
  const ServeResult none = run_serving(*model_, plan_, "x", workload_, options(one / 4));
  EXPECT_EQ(summarize(none).completed, 0);
  EXPECT_EQ(summarize(none).rejected, 3);  // each user's first request; the user then leaves
}

TEST_F(ServingLoop, ARunCutShortCountsTheRequestsStillWaitingInItsTtft) {
  ServeOptions o = options(100 * largest_reservation());
  o.duration_s = 1e-9;  // over as soon as the first request's prefill has run
  const ServeResult r = run_serving(*model_, plan_, "x", workload_, o);
  const ServeSummary s = summarize(r);
  EXPECT_EQ(s.requests, 3);  // every user arrives at 0
  EXPECT_EQ(s.completed, 0);
  EXPECT_EQ(s.without_first_token, 2);
  ASSERT_EQ(ttft_samples(r).size(), 3u);
  EXPECT_GT(s.ttft_p99_s, 0.0);  // the admitted one's prefill
}

// Summaries over a hand-made run: every request issued and not refused has a TTFT; one without a
// first token counts until the end; ITL and throughput come from the token times.
TEST(ServeSummary, PercentilesOverEveryRequestNotRefusedWithWaitingOnesCensoredAtTheEnd) {
  ServeResult r;
  r.end_s = 10;
  const auto request = [](double arrival, double first_token, bool completed, bool rejected) {
    RequestRecord rec;
    rec.arrival_s = arrival;
    rec.first_token_s = first_token;
    if (first_token >= 0) rec.token_s = {first_token, first_token + 0.5};
    rec.completed = completed;
    rec.rejected = rejected;
    return rec;
  };
  r.requests = {request(0, 1, true, false),    // TTFT 1, done
                request(1, 3, false, false),   // TTFT 2, still decoding at the end
                request(4, -1, false, false),  // waited 6 s and counting
                request(5, -1, false, true)};  // refused: never counted
  const ServeSummary s = summarize(r);
  EXPECT_EQ(s.requests, 4);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.rejected, 1);
  EXPECT_EQ(s.without_first_token, 1);
  EXPECT_EQ(ttft_samples(r), (std::vector<double>{1, 2, 6}));
  EXPECT_DOUBLE_EQ(s.ttft_p50_s, 2);
  EXPECT_DOUBLE_EQ(s.ttft_p95_s, 6);
  EXPECT_DOUBLE_EQ(s.itl_mean_s, 0.5);
  EXPECT_DOUBLE_EQ(s.decode_tokens_per_s, 0.4);
}

}  // namespace
}  // namespace kvplan::serve
