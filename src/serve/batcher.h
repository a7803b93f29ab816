// Continuous batching over one KV configuration's packed pages, the part of serving that
// `kvplan bench serve` (a simulated clock, serve/serving_loop.h) and `kvplan serve` (the wall
// clock, serve/engine.h) share:
//   - admission: a sequence reserves its prompt and answer tokens at the configuration's real
//     bytes (formats/kv_bytes.h; sliding windows counted) out of the KV memory;
//   - prefill: its longest stored prefix is restored from the runtime's tiers and only the rest is
//     computed, each whole chunk stored as it is computed (serve/prefix_cache.h);
//   - decode: one token of every running sequence in one batched forward pass.
// Scheduling (who is admitted when, what a token is) stays with the caller.
//
//   Batcher b(model, plan, runtime_options, 64 << 20);
//   const uint64_t need = b.reservation(prompt.size() + answer);
//   if (b.fits(need)) { Batcher::Prefilled p = b.admit(prompt, need); ... }
//   RowMatrix logits = b.step({{p.id, token}});   // one row per stepped sequence
//   b.release(p.id);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/transformer.h"
#include "plan/plan.h"
#include "runtime/offload_runtime.h"
#include "serve/prefix_cache.h"

namespace kvplan::serve {

struct ServingTiers {
  size_t chunk_tokens = 256;
  size_t longest_prompt_tokens = 0;  // the device tier stages this prompt's chunks
  uint64_t host_memory_bytes = 1ull << 30;
  std::filesystem::path disk_dir;  // empty: no disk tier
  uint64_t disk_bytes = 16ull << 30;
};

// The runtime a serving process keeps its stored prefixes in: the device tier stages restores and
// stores (room for the longest prompt's chunks), host pages hold stored chunks (at least one), and
// the disk tier takes what the host tier evicts. Pages are plain host memory (the harness runs on
// the CPU); disk writes are not fsynced (a cache, not a record).
RuntimeOptions serving_runtime_options(const Plan& plan, const ServingTiers& tiers);

class Batcher {
 public:
  using SequenceId = uint64_t;

  // Throws Error like PrefixCache for runtime options the plan cannot take.
  Batcher(const Transformer& model, const Plan& plan, RuntimeOptions runtime,
          uint64_t kv_memory_bytes);

  // The KV memory a sequence of `tokens` tokens holds at its longest.
  [[nodiscard]] uint64_t reservation(int64_t tokens) const;
  [[nodiscard]] bool can_ever_fit(uint64_t bytes) const { return bytes <= kv_memory_bytes_; }
  [[nodiscard]] bool fits(uint64_t bytes) const { return used_bytes_ + bytes <= kv_memory_bytes_; }
  [[nodiscard]] uint64_t used_bytes() const { return used_bytes_; }
  [[nodiscard]] uint64_t kv_memory_bytes() const { return kv_memory_bytes_; }
  [[nodiscard]] size_t running() const { return sequences_.size(); }
  [[nodiscard]] double bytes_per_token() const { return bytes_per_token_; }
  [[nodiscard]] RuntimeStats runtime_stats() const { return prefixes_.stats(); }

  struct Prefilled {
    SequenceId id = 0;
    Eigen::RowVectorXf logits;  // the prompt's last token's
    PrefixRestore restore;      // what came from stored prefixes
  };
  // Admits a sequence holding `reserved` bytes of the KV memory (the caller checked fits()):
  // restores its prompt's longest stored prefix and prefills the rest, storing its chunks.
  Prefilled admit(std::span<const int32_t> prompt, uint64_t reserved);

  struct StepToken {
    SequenceId id = 0;
    int32_t token = 0;  // appended to the sequence
  };
  // One decode step: each sequence's token is appended in one batched forward pass; row i of the
  // result is tokens[i]'s sequence's next-token logits.
  RowMatrix step(std::span<const StepToken> tokens);

  // The sequence leaves: its pages and its reservation are freed.
  void release(SequenceId id);

 private:
  struct Sequence {
    std::unique_ptr<KvCache> cache;
    uint64_t reserved = 0;
  };
  const Transformer& model_;
  KvGeometry geometry_;
  std::vector<KvPair> kv_config_;  // one pair per layer, or per KV head (Plan::kv_config)
  QuantSettings settings_;
  KvCacheOptions cache_options_;
  PrefixCache prefixes_;
  uint64_t kv_memory_bytes_ = 0;
  uint64_t used_bytes_ = 0;
  double bytes_per_token_ = 0;
  SequenceId next_id_ = 1;
  std::map<SequenceId, Sequence> sequences_;
};

}  // namespace kvplan::serve
