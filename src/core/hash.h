// Stable 64-bit hashing (xxHash XXH3) for fingerprints, calibration hashes, chunk keys and payload
// checksums. Values are identical across processes, machines and builds.
//
//   kvplan::Hasher h;  h.update("llama");  h.update_u64(32);  uint64_t fp = h.digest();
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvplan {

uint64_t hash64(std::span<const std::byte> bytes, uint64_t seed = 0);
uint64_t hash64(std::string_view text, uint64_t seed = 0);

// "%016x" of a hash, the form written into JSON files.
std::string hash_hex(uint64_t hash);

// Incremental hashing of a sequence of fields. Each string is length-prefixed so that
// ("ab","c") and ("a","bc") hash differently.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& update(std::string_view text);
  Hasher& update_bytes(std::span<const std::byte> bytes);
  Hasher& update_u64(uint64_t value);
  // Bytes without a length prefix: consecutive update_raw calls hash like one call over their
  // concatenation, so a stream can be fed in pieces of any size.
  Hasher& update_raw(std::span<const std::byte> bytes);
  [[nodiscard]] uint64_t digest() const;
  // Starts over, as if newly constructed (keeps the state's allocation).
  void reset();

 private:
  void* state_;  // XXH3_state_t*, kept opaque so xxhash.h stays out of every includer
};

}  // namespace kvplan
