#include "runtime/chunk_key.h"

#include <bit>

#include "core/error.h"
#include "core/hash.h"

namespace kvplan {

static_assert(std::endian::native == std::endian::little,
              "chunk keys hash token ids as little-endian uint32 bytes");

uint64_t chunk_key_root(const KeyNamespace& ns, size_t chunk_tokens) {
  Hasher h;
  h.update("kvplan.chunk-key/v1");
  h.update_u64(ns.model_fingerprint);
  h.update_u64(ns.plan_fingerprint);
  h.update_u64(chunk_tokens);
  return h.digest();
}

uint64_t chunk_key_next(uint64_t previous, std::span<const uint32_t> chunk) {
  return hash64(std::as_bytes(chunk), previous);
}

std::vector<uint64_t> chunk_keys(const KeyNamespace& ns, std::span<const uint32_t> tokens,
                                 size_t chunk_tokens) {
  if (chunk_tokens == 0) fail(ErrorCode::kInvalidArgument, "chunk_tokens 0: expected >= 1");
  std::vector<uint64_t> keys;
  keys.reserve(tokens.size() / chunk_tokens);
  uint64_t key = chunk_key_root(ns, chunk_tokens);
  for (size_t off = 0; off + chunk_tokens <= tokens.size(); off += chunk_tokens) {
    key = chunk_key_next(key, tokens.subspan(off, chunk_tokens));
    keys.push_back(key);
  }
  return keys;
}

}  // namespace kvplan
