// The serving loop of `kvplan bench serve`: a workload's requests served by the harness over one
// KV configuration's packed pages, with continuous batching and prefixes reused through the
// runtime's tiers.
//
// Time is the loop's own clock: it advances by the measured compute of each step (a request's
// prefix restore and prefill with its stores, a batched decode step of every running sequence)
// and jumps to the next arrival when nothing runs, so arrivals and latencies share one time base
// and a slow machine serves the same workload more slowly rather than differently.
//
// Memory: a request is admitted when its reservation — its prompt and answer tokens at the
// configuration's real bytes (formats/kv_bytes.h; sliding windows counted) — fits in what
// `kv_memory_bytes` leaves beside the running ones (first come, first served); a request's prompt
// chunks go to the runtime as they are computed (host tier `host_memory_bytes`, then disk) and a
// returning user's prompt restores its longest stored prefix from there instead of recomputing it.
//
//   ServeResult r = run_serving(model, plan, "q4_0/q4_0", workload, {.kv_memory_bytes = 64 << 20});
//   ServeSummary s = summarize(r);   // s.completed, s.ttft_p95_s, ...
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "plan/plan.h"
#include "runtime/transfer_stats.h"
#include "serve/workload.h"

namespace kvplan::serve {

struct ServeOptions {
  uint64_t kv_memory_bytes = 64ull << 20;   // the running requests' KV
  uint64_t host_memory_bytes = 1ull << 30;  // stored prefix chunks
  std::filesystem::path disk_dir;           // empty: no disk tier
  uint64_t disk_bytes = 16ull << 30;
  size_t chunk_tokens = 256;
  // The run ends at this time (0: when every request of the workload is done); requests not
  // finished by then are not completed.
  double duration_s = 0;
  // Requests whose served next-token distributions are compared with exact KV (the first ones
  // admitted).
  int quality_samples = 4;
};

struct RequestRecord {
  int user = 0;
  int round = 0;
  double arrival_s = 0;
  double admitted_s = -1, first_token_s = -1, finished_s = -1;
  int64_t prompt_tokens = 0;
  int64_t restored_tokens = 0;  // from stored prefixes
  int64_t computed_tokens = 0;  // prefilled
  std::vector<double> token_s;  // when each generated token was ready
  bool completed = false;
  bool rejected = false;  // its reservation exceeds the whole KV memory
};

struct ServeResult {
  std::string label;
  double bytes_per_token = 0;           // the configuration's steady-state real bytes
  std::vector<RequestRecord> requests;  // in arrival order
  RuntimeStats runtime;
  double end_s = 0;
  int most_running = 0;
  // Served quality: KL(exact || served) of the next-token distributions the sampled requests were
  // served from, each answer position compared with the exact-KV model given the same tokens.
  double served_mean_kl = 0;
  double served_top1 = 0;  // fraction of those positions whose argmax matches exact KV
  int64_t quality_positions = 0;
};

ServeResult run_serving(const Transformer& model, const Plan& plan, const std::string& label,
                        const Workload& workload, const ServeOptions& options);

// Time to first token of every request the run issued and did not refuse, in arrival order. One
// still waiting for its first token when the run ends counts the wait it has had (end_s minus its
// arrival): a lower bound, never left out, so a configuration that leaves its slowest requests
// queued cannot look faster than one that serves them.
std::vector<double> ttft_samples(const ServeResult& result);

struct ServeSummary {
  int requests = 0, completed = 0, rejected = 0;
  int without_first_token = 0;  // issued, not refused, still waiting for a token at the end
  double ttft_p50_s = 0, ttft_p95_s = 0, ttft_p99_s = 0;  // over ttft_samples()
  double itl_mean_s = 0, itl_p95_s = 0;                   // between consecutive tokens
  double decode_tokens_per_s = 0;                         // generated tokens / the run's time
  int64_t computed_tokens = 0, restored_tokens = 0;
};

ServeSummary summarize(const ServeResult& result);

}  // namespace kvplan::serve
