#include "core/hash.h"

// xxHash compiled inline: Debian's libxxhash is built for the baseline x86-64 ISA (about 8 GB/s
// here), while inline in this build it uses the AVX2/AVX-512 the build targets (about 50 GB/s in
// cache), which matters for payload checksums. XXH3 values do not depend on the implementation;
// tests/core/hash_test.cpp checks them against the shared library.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

namespace kvplan {

uint64_t hash64(std::span<const std::byte> bytes, uint64_t seed) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

uint64_t hash64(std::string_view text, uint64_t seed) {
  return XXH3_64bits_withSeed(text.data(), text.size(), seed);
}

std::string hash_hex(uint64_t hash) {
  return fmt::format("{:016x}", hash);
}

Hasher::Hasher() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Hasher::~Hasher() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

Hasher& Hasher::update(std::string_view text) {
  update_u64(text.size());
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), text.data(), text.size());
  return *this;
}

Hasher& Hasher::update_bytes(std::span<const std::byte> bytes) {
  update_u64(bytes.size());
  return update_raw(bytes);
}

Hasher& Hasher::update_raw(std::span<const std::byte> bytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), bytes.data(), bytes.size());
  return *this;
}

Hasher& Hasher::update_u64(uint64_t value) {
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(value >> (8 * i));
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), le, sizeof le);
  return *this;
}

void Hasher::reset() {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

uint64_t Hasher::digest() const {
  return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_));
}

}  // namespace kvplan
