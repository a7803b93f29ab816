#include "core/hash.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kvplan
