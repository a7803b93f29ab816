// Keys of cached chunks: a chained hash over token chunks, seeded by the model and plan
// fingerprints, so the key of chunk i names the whole prefix up to and including it (a chunk
// after a different prefix gets a different key). XXH3 over little-endian uint32 token ids:
// identical across processes, machines and builds.
//
//   std::vector<uint64_t> keys = kvplan::chunk_keys({model_fp, plan_fp}, tokens, 256);
//   // keys.size() == tokens.size() / 256 (a partial tail chunk gets no key: it is not cached)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvplan {

struct KeyNamespace {
  uint64_t model_fingerprint = 0;
  uint64_t plan_fingerprint = 0;
};

// The key before the first chunk (the "empty prefix").
uint64_t chunk_key_root(const KeyNamespace& ns, size_t chunk_tokens);
// The key of a chunk that follows the prefix keyed `previous`.
uint64_t chunk_key_next(uint64_t previous, std::span<const uint32_t> chunk);
// Keys of every whole chunk of `tokens`.
std::vector<uint64_t> chunk_keys(const KeyNamespace& ns, std::span<const uint32_t> tokens,
                                 size_t chunk_tokens);

}  // namespace kvplan
