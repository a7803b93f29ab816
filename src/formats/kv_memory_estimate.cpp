#include "formats/kv_memory_estimate.h"

#include "core/error.h"
#include "formats/kv_bytes.h"

namespace kvplan {

KvMemoryEstimate estimate_kv_memory(const KvGeometry& geometry, std::span<const KvPair> pairs,
                                    const QuantSettings& settings,
                                    const KvMemoryQuestion& question) {
  const int n = geometry.n_layers();
  const std::vector<KvPair> bf16(n, KvPair::parse("KV16"));
  QuantSettings bf16_settings = settings;
  bf16_settings.mode = QuantMode::kPerToken;

  KvMemoryEstimate e;
  e.bytes_per_token = kv_bytes_per_token(geometry, pairs, settings);
  e.equivalent_bits = kv_equivalent_bits(geometry, pairs);
  for (const int64_t t : question.contexts) {
    e.contexts.push_back(
        {.context = t,
         .bytes = kv_cache_bytes(geometry, pairs, settings, t, question.sequences),
         .bf16_bytes = kv_cache_bytes(geometry, bf16, bf16_settings, t, question.sequences)});
  }
  if (question.available_bytes) {
    e.max_context_per_sequence = max_tokens_that_fit(geometry, pairs, settings,
                                                     *question.available_bytes, question.sequences);
  }
  return e;
}

bool pair_fits_every_layer(const KvGeometry& geometry, const KvPair& pair,
                           const QuantSettings& settings) {
  try {
    for (int l = 0; l < geometry.n_layers(); ++l) {
      (void)layer_bytes_per_token(geometry.layers[l], pair, settings, l);
    }
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace kvplan
