#include "core/stream_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Around and across the interleaved steps, from misaligned sources to misaligned destinations.
TEST(StreamCopy, CopiesExactlyAcrossSteps) {
  std::mt19937_64 rng(5);
  constexpr size_t kGuard = 64;
  std::vector<std::byte> src(4 * kStreamStepBytes + 200);
  for (auto& b : src) b = static_cast<std::byte>(rng());
  for (size_t dst_offset : {0, 1, 31, 32, 63}) {
    for (size_t n : {kStreamStepBytes - 1, kStreamStepBytes, kStreamStepBytes + 1,
                     2 * kStreamStepBytes + 63, 3 * kStreamStepBytes + 4095}) {
      const size_t src_offset = 7;
      std::vector<std::byte> dst(kGuard + dst_offset + n + kGuard, std::byte{0x5A});
      copy_nontemporal(dst.data() + kGuard + dst_offset, src.data() + src_offset, n);
      fence_nontemporal_stores();
      ASSERT_EQ(std::memcmp(dst.data() + kGuard + dst_offset, src.data() + src_offset, n), 0)
          << "dst_offset " << dst_offset << " n " << n;
      for (size_t i = 0; i < kGuard + dst_offset; ++i) ASSERT_EQ(dst[i], std::byte{0x5A});
      for (size_t i = kGuard + dst_offset + n; i < dst.size(); ++i) {
        ASSERT_EQ(dst[i], std::byte{0x5A});
      }
    }
  }
}

// The visitor sees every source byte once, in order, in pieces no larger than a step, and the
// copy is the same as without a visitor.
TEST(StreamCopy, VisitingSeesEveryByteInOrder) {
  std::mt19937_64 rng(6);
  std::vector<std::byte> src(3 * kStreamStepBytes + 333);
  for (auto& b : src) b = static_cast<std::byte>(rng());
  for (size_t dst_offset : {0, 5, 32}) {
    for (size_t n : {size_t{0}, size_t{3}, size_t{100}, kStreamStepBytes, src.size() - 9}) {
      std::vector<std::byte> dst(dst_offset + n + 1, std::byte{0});
      std::vector<std::byte> seen;
      size_t largest_piece = 0;
      copy_nontemporal_visiting(dst.data() + dst_offset, src.data() + 9, n,
                                [&](const std::byte* piece, size_t len) {
                                  seen.insert(seen.end(), piece, piece + len);
                                  largest_piece = std::max(largest_piece, len);
                                });
      fence_nontemporal_stores();
      const std::vector<std::byte> expected(src.begin() + 9, src.begin() + 9 + n);
      EXPECT_EQ(seen, expected) << "dst_offset " << dst_offset << " n " << n;
      EXPECT_LE(largest_piece, kStreamStepBytes);
      EXPECT_EQ(std::vector<std::byte>(dst.begin() + dst_offset, dst.begin() + dst_offset + n),
                expected);
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
