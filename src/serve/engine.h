// Live serving for `kvplan serve`: requests from any thread, served by one worker thread with the
// continuous batching of serve/batcher.h on the wall clock — admitted first come first served when
// their KV reservation fits, prefilled from their longest stored prefix, then decoded together one
// token per step, each with its own sampler. Callers read a request's tokens from its
// GenerationStream as they are produced, and cancel it to free its sequence (a client gone).
//
//   Engine engine(model, plan, {.kv_memory_bytes = 64 << 20, .tiers = {...}});
//   std::shared_ptr<GenerationStream> s = engine.submit({.prompt = ids, .max_tokens = 32});
//   GenerationStream::Snapshot snap = s->wait_finished();   // snap.tokens, snap.finish
//   engine.drain();   // no new requests; the queued and running ones finish; the worker exits
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "model/transformer.h"
#include "plan/plan.h"
#include "runtime/transfer_stats.h"
#include "serve/batcher.h"
#include "serve/sampler.h"

namespace kvplan::serve {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends at one of these (finish kStop), not returned
};

enum class FinishReason { kNone, kLength, kStop, kCancelled };

// One request's output as the engine produces it.
class GenerationStream {
 public:
  struct Snapshot {
    std::vector<int32_t> tokens;  // every token generated so far
    FinishReason finish = FinishReason::kNone;
    int64_t prompt_tokens = 0;
    int64_t restored_tokens = 0;  // of the prompt, from stored prefixes (known once admitted)
  };
  // Returns once more than `seen` tokens exist, the request has finished, or `timeout` passed.
  [[nodiscard]] Snapshot wait(size_t seen, std::chrono::milliseconds timeout) const;
  [[nodiscard]] Snapshot wait_finished() const;
  // The engine drops the request at its next step (its pages and reservation are freed); the
  // stream then finishes with kCancelled unless it had finished already.
  void cancel() { cancelled_.store(true); }
  [[nodiscard]] bool cancelled() const { return cancelled_.load(); }

 private:
  friend class Engine;
  [[nodiscard]] Snapshot snapshot() const;
  void push(int32_t token);
  void set_restored(int64_t restored);
  void finish(FinishReason reason);

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<int32_t> tokens_;
  FinishReason finish_ = FinishReason::kNone;
  int64_t prompt_tokens_ = 0;
  int64_t restored_tokens_ = 0;
  std::atomic<bool> cancelled_{false};
};

struct EngineOptions {
  uint64_t kv_memory_bytes = 64ull << 20;
  ServingTiers tiers;  // tiers.longest_prompt_tokens: the longest prompt the engine takes
};

// Upper bounds of the TTFT histogram's buckets, seconds (Prometheus `le`; +Inf is implied).
inline constexpr double kTtftBucketsS[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

struct EngineCounters {
  uint64_t requests = 0;  // accepted by submit()
  uint64_t finished_length = 0, finished_stop = 0, cancelled = 0;
  uint64_t prompt_tokens = 0, restored_tokens = 0, computed_tokens = 0, generated_tokens = 0;
  uint64_t ttft_buckets[std::size(kTtftBucketsS)] = {};  // cumulative: first token within bound
  uint64_t ttft_count = 0;
  double ttft_sum_s = 0;
  size_t running = 0, waiting = 0;
  uint64_t kv_used_bytes = 0, kv_memory_bytes = 0;
  double bytes_per_token = 0;
  RuntimeStats runtime;
};

class Engine {
 public:
  Engine(const Transformer& model, const Plan& plan, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The KV memory a request of prompt + max_tokens tokens reserves.
  [[nodiscard]] uint64_t reservation(int64_t tokens) const;
  [[nodiscard]] uint64_t kv_memory_bytes() const { return kv_memory_bytes_; }
  // Queues the request. Throws Error(kResourceExhausted) when its reservation exceeds the whole KV
  // memory or the engine is draining, Error(kInvalidArgument) for an empty prompt or max_tokens
  // < 1.
  std::shared_ptr<GenerationStream> submit(GenerationRequest request);
  // Stops taking requests, serves the queued and running ones to their end, joins the worker.
  void drain();
  [[nodiscard]] EngineCounters counters() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    GenerationRequest request;
    std::shared_ptr<GenerationStream> stream;
    uint64_t reserved = 0;
    Clock::time_point submitted;
  };
  struct Active {
    Pending pending;
    Batcher::SequenceId id = 0;
    Sampler sampler;
    int64_t generated = 0;
    int32_t last = 0;
  };
  void run();
  // Delivers a sampled token; false when the request has finished (and leaves the batch).
  bool deliver(Active& a, int32_t token);
  void admit_waiting(std::unique_lock<std::mutex>& lock);
  void decode_step(std::unique_lock<std::mutex>& lock);
  void finish(Active& a, FinishReason reason);

  Batcher batcher_;  // the worker's alone
  const uint64_t kv_memory_bytes_;
  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable work_;
  std::deque<Pending> queue_;
  std::vector<Active> running_;
  bool draining_ = false;
  EngineCounters counters_;
  std::thread worker_;
};

}  // namespace kvplan::serve
