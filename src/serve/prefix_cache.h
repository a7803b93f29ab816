// Conversation prefixes kept in the runtime's tiers as the harness cache's own page bytes: a
// sequence's finished chunks are stored (device tier = the KV memory budget, then host, then
// disk), keyed by the chained hashes of its tokens; a new request restores its longest stored
// prefix into its pages (bytes copied as they are, never re-packed) and computes only the rest.
// A stored chunk that is corrupt, or of another plan or model, is refused by the runtime and its
// tokens are recomputed: nothing wrong is ever attended over.
//
// Restored tokens give the logits computed ones give when the tokens are computed in the same
// pieces: prefill in chunks that start at multiples of chunk_tokens (prefill_aligned), as stored
// chunks are.
//
//   PrefixCache prefixes(plan, {.chunk_tokens = 256, .device_capacity_bytes = 64 << 20});
//   KvCache cache(config, cache_options(plan));
//   PrefixRestore r = prefixes.restore(tokens, cache);      // r.tokens restored, r.tiers
//   prefill_aligned(model, tokens, r.tokens, cache, prefixes.chunk_tokens());
//   prefixes.store(tokens, cache);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/transformer.h"
#include "plan/plan.h"
#include "runtime/offload_runtime.h"

namespace kvplan::serve {

// The harness cache of a plan: its pairs, settings and FP8 scales.
KvCacheOptions cache_options(const Plan& plan);

struct PrefixRestore {
  size_t tokens = 0;        // restored: whole chunks, at least one token left to compute
  std::vector<Tier> tiers;  // where each restored chunk came from
  TransferStatus status;    // !ok when a chunk was refused (its tokens are computed instead)
};

class PrefixCache {
 public:
  // The runtime of `plan` (whose pages are those of the caches this serves). Throws Error like
  // OffloadRuntime, and kInvalidArgument when a KIVI layer's residual window does not divide
  // chunk_tokens (stored chunks must hold committed tokens only).
  PrefixCache(const Plan& plan, RuntimeOptions options);

  [[nodiscard]] size_t chunk_tokens() const { return runtime_.layout().chunk_tokens(); }
  [[nodiscard]] OffloadRuntime& runtime() { return runtime_; }
  [[nodiscard]] RuntimeStats stats() const { return runtime_.stats(); }

  // Restores into the empty `cache` the longest stored prefix of `tokens`, leaving at least one
  // token to compute (the last token's logits are needed).
  PrefixRestore restore(std::span<const int32_t> tokens, KvCache& cache);
  // Stores the whole chunks of `tokens`, from `first_chunk` on, that `cache` holds committed in
  // every layer and that the device tier does not hold already; stops at a chunk a sliding window
  // has freed; waits for the copies; returns how many were stored.
  size_t store(std::span<const int32_t> tokens, const KvCache& cache, size_t first_chunk = 0);

  // prefill_aligned, storing each whole chunk as soon as it is computed: a sliding-window layer
  // frees the pages behind its window, so a long prompt's first chunks are gone by its end.
  RowMatrix prefill_storing(const Transformer& model, std::span<const int32_t> tokens, size_t from,
                            KvCache& cache);

 private:
  OffloadRuntime runtime_;
};

// Prefills tokens [from, end) of `tokens` into `cache` (which holds [0, from)) in pieces that
// start at multiples of `chunk_tokens`, as stored chunks were computed; returns the last token's
// logits.
RowMatrix prefill_aligned(const Transformer& model, std::span<const int32_t> tokens, size_t from,
                          KvCache& cache, size_t chunk_tokens);

}  // namespace kvplan::serve
