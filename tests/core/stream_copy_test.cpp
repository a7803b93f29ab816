#include "core/stream_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace kvplan {
namespace {

// Every destination alignment and length around the vector and unroll boundaries: the bytes land
// exactly, and the guard bytes on both sides stay untouched.
TEST(StreamCopy, CopiesExactlyAtEveryAlignmentAndLength) {
  std::mt19937_64 rng(3);
  constexpr size_t kGuard = 64;
  std::vector<std::byte> src(5000);
  for (auto& b : src) b = static_cast<std::byte>(rng());
  for (size_t dst_offset = 0; dst_offset < 64; ++dst_offset) {
    for (size_t n : {0, 1, 15, 31, 32, 33, 127, 128, 129, 255, 256, 1000, 4096, 4999}) {
      for (size_t src_offset : {0, 1, 17}) {
        if (src_offset + n > src.size()) continue;
        std::vector<std::byte> dst(kGuard + dst_offset + n + kGuard, std::byte{0xA5});
        copy_nontemporal(dst.data() + kGuard + dst_offset, src.data() + src_offset, n);
        fence_nontemporal_stores();
        ASSERT_EQ(std::memcmp(dst.data() + kGuard + dst_offset, src.data() + src_offset, n), 0)
            << "dst_offset " << dst_offset << " n " << n << " src_offset " << src_offset;
        for (size_t i = 0; i < kGuard + dst_offset; ++i) ASSERT_EQ(dst[i], std::byte{0xA5});
        for (size_t i = kGuard + dst_offset + n; i < dst.size(); ++i) {
          ASSERT_EQ(dst[i], std::byte{0xA5});
        }
      }
    }
  }
}

TEST(StreamCopy, CopiesLargeBuffers) {
  std::mt19937_64 rng(4);
  std::vector<std::byte> src((size_t{8} << 20) + 77);
  for (auto& b : src) b = static_cast<std::byte>(rng());
  std::vector<std::byte> dst(src.size());
  copy_nontemporal(dst.data(), src.data(), src.size());
  fence_nontemporal_stores();
  EXPECT_EQ(dst, src);
}

}  // namespace
}  // namespace kvplan
