#include "core/hash.h"

#include <xxhash.h>  // the shared library, not kvplan's inline copy

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kvplan {
namespace {

TEST(Hash, StableAcrossRunsAndBuilds) {
  // XXH3-64 of "" with seed 0 is a published constant (xxHash's own test vectors).
  EXPECT_EQ(hash64(std::string_view("")), 0x2D06800538D394C2ull);
  EXPECT_EQ(hash_hex(0x2D06800538D394C2ull), "2d06800538d394c2");
}

TEST(Hash, HasherSeparatesFields) {
  Hasher a, b;
  a.update("ab").update("c");
  b.update("a").update("bc");
  EXPECT_NE(a.digest(), b.digest());
  Hasher c, d;
  c.update("llama").update_u64(32);
  d.update("llama").update_u64(32);
  EXPECT_EQ(c.digest(), d.digest());
}

// kvplan compiles xxHash inline for the build's vector ISA; its values must equal the Debian
// library's (built for baseline x86-64) at every length the implementation branches on.
TEST(Hash, InlineXxh3MatchesTheSharedLibrary) {
  std::mt19937_64 rng(42);
  std::vector<std::byte> data(300000);
  for (auto& b : data) b = static_cast<std::byte>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
  for (size_t n : {4095, 4096, 4097, 65535, 65536, 65537, 100003, 300000}) lengths.push_back(n);
  for (size_t n : lengths) {
    const uint64_t seed = rng() % 3;
    ASSERT_EQ(hash64(std::span(data.data(), n), seed), XXH3_64bits_withSeed(data.data(), n, seed))
        << n;
  }
}

TEST(Hash, RawUpdatesSplitAnywhereHashLikeOne) {
  std::mt19937_64 rng(7);
  std::vector<std::byte> data(70000);
  for (auto& b : data) b = static_cast<std::byte>(rng());
  Hasher whole;
  whole.update_raw(data);
  for (size_t piece : {1, 63, 64, 255, 4096, 65536}) {
    Hasher parts;
    for (size_t off = 0; off < data.size(); off += piece) {
      parts.update_raw(std::span(data).subspan(off, std::min(piece, data.size() - off)));
    }
    EXPECT_EQ(parts.digest(), whole.digest()) << piece;
  }
  EXPECT_EQ(whole.digest(), XXH3_64bits(data.data(), data.size()));
  Hasher prefixed;
  prefixed.update_bytes(data);
  EXPECT_NE(prefixed.digest(), whole.digest());
}

TEST(Hash, ResetStartsOver) {
  Hasher h;
  h.update("something before");
  h.reset();
  h.update_raw(std::as_bytes(std::span("abc", 3)));
  EXPECT_EQ(h.digest(), hash64(std::string_view("abc")));
}

}  // namespace
}  // namespace kvplan
