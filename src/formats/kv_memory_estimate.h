// What a per-layer KV format assignment costs a model: bytes per token, equivalent bits, the
// bytes of each asked context against a bf16 cache, and the longest context that fits a memory —
// the numbers `kvplan estimate` lists for every KV choice.
//
//   KvMemoryQuestion q;
//   q.contexts = {32768};
//   q.available_bytes = 64ull << 30;
//   std::vector<KvPair> layers(32, KvPair::parse("K8V4"));
//   KvMemoryEstimate e = estimate_kv_memory(geometry, layers, settings, q);
//   e.contexts[0].bytes;                  // 1.75 GiB on Llama-3.1-8B
//   e.contexts[0].compression_vs_bf16();  // 2.29
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "formats/kv_geometry.h"
#include "formats/kv_pair.h"
#include "formats/quant_settings.h"

namespace kvplan {

struct KvMemoryQuestion {
  std::vector<int64_t> contexts;  // tokens per sequence
  int64_t sequences = 1;
  std::optional<uint64_t> available_bytes;  // memory the cache may take, when asked what fits
};

// The cache's bytes at one context, and those of a bf16 cache (per-token, same pages) beside it.
struct KvContextBytes {
  int64_t context = 0;
  uint64_t bytes = 0;
  uint64_t bf16_bytes = 0;
  [[nodiscard]] double compression_vs_bf16() const {
    return bytes ? static_cast<double>(bf16_bytes) / static_cast<double>(bytes) : 0.0;
  }
};

struct KvMemoryEstimate {
  double bytes_per_token = 0;            // steady state, windows ignored
  double equivalent_bits = 0;            // mean over layers of the pair's nominal bits per value
  std::vector<KvContextBytes> contexts;  // one per asked context, in order
  // With available_bytes: the longest context per sequence that fits (0 when not one token does).
  std::optional<int64_t> max_context_per_sequence;
};

// `pairs` has one entry per layer. Throws Error(kInvalidArgument) like kv_cache_bytes when a
// format cannot pack a layer's rows.
KvMemoryEstimate estimate_kv_memory(const KvGeometry& geometry, std::span<const KvPair> pairs,
                                    const QuantSettings& settings,
                                    const KvMemoryQuestion& question);

// True when `pair` can pack the rows of every layer of `geometry` under `settings`.
bool pair_fits_every_layer(const KvGeometry& geometry, const KvPair& pair,
                           const QuantSettings& settings);

}  // namespace kvplan
