// What a KV configuration costs the harness: the memory its cache really holds as tokens arrive
// (resident memory measured, beside formats/kv_bytes.h's estimate), and prefill and decode tokens
// per second of the model over it. `kvplan bench kv` runs every configuration on the same inputs
// in one invocation and prints each against the first (the reference, e.g. f16/f16).
//
//   KvMemoryRow m = measure_kv_memory(config, options, 32768);   // m.resident_bytes ~ m.estimate
//   KvSpeedRow s = measure_kv_speed(model, options, prompt, 64);  // s.prefill_tokens_per_s
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/transformer.h"

namespace kvplan::serve {

struct KvMemoryRow {
  int64_t tokens = 0;
  uint64_t estimate_bytes = 0;  // kv_cache_bytes of the geometry, pairs and settings
  uint64_t held_bytes = 0;      // what the cache says it holds (pages and staging)
  uint64_t resident_bytes = 0;  // resident memory grown while the cache filled
};

// Fills a cache of `options` for `config` with `tokens` tokens of random K/V rows (chunks of 512,
// committed as the model would), in a child process so that each measurement starts from the same
// resident memory. Throws Error(kInternal) when the child fails or /proc is unreadable.
KvMemoryRow measure_kv_memory(const ModelConfig& config, const KvCacheOptions& options,
                              int64_t tokens);

struct KvSpeedRow {
  int64_t prompt_tokens = 0;
  int64_t decode_tokens = 0;
  double prefill_tokens_per_s = 0;
  double decode_tokens_per_s = 0;
};

// Prefills `prompt` (chunks of 512 tokens, the last token's logits only), then decodes
// `decode_tokens` tokens greedily one at a time, over a fresh cache of `options`.
KvSpeedRow measure_kv_speed(const Transformer& model, const KvCacheOptions& options,
                            std::span<const int32_t> prompt, int64_t decode_tokens);

}  // namespace kvplan::serve
