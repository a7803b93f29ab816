#include "runtime/checksum_pool.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "core/hash.h"
#include "runtime/stored_object.h"

namespace kvplan {
namespace {

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// The checksum as stored_object.h defines it, written out independently of the library's loops.
uint64_t checksum_by_definition(const std::vector<std::byte>& data) {
  Hasher h;
  for (size_t off = 0; off < data.size(); off += kChecksumBlockBytes) {
    const size_t len = std::min(kChecksumBlockBytes, data.size() - off);
    h.update_u64(hash64(std::span(data).subspan(off, len)));
  }
  h.update_u64(data.size());
  return h.digest();
}

TEST(PayloadChecksum, EveryWayOfComputingItAgrees) {
  const size_t block = kChecksumBlockBytes;
  for (size_t n : {size_t{0}, size_t{1}, block - 1, block, block + 1, 5 * block + 333}) {
    const auto data = random_bytes(n, n);
    const uint64_t expected = checksum_by_definition(data);
    EXPECT_EQ(payload_checksum(data.data(), n), expected) << n;
    std::vector<std::byte> copy(n);
    EXPECT_EQ(copy_with_checksum(copy.data(), data.data(), n), expected) << n;
    EXPECT_EQ(copy, data);
    std::vector<uint64_t> blocks(checksum_block_count(n));
    hash_checksum_blocks(data.data(), n, blocks.data());
    EXPECT_EQ(combine_block_hashes(blocks, n), expected) << n;
    for (unsigned threads : {0u, 1u, 3u}) {
      ChecksumPool pool(threads);
      EXPECT_EQ(pool.checksum(data.data(), n), expected) << n << " bytes, " << threads;
    }
  }
}

TEST(PayloadChecksum, SeesSwappedBlocksAndLength) {
  auto data = random_bytes(3 * kChecksumBlockBytes, 9);
  const uint64_t before = payload_checksum(data.data(), data.size());
  std::swap_ranges(data.begin(), data.begin() + kChecksumBlockBytes,
                   data.begin() + kChecksumBlockBytes);
  EXPECT_NE(payload_checksum(data.data(), data.size()), before);
  EXPECT_NE(payload_checksum(data.data(), data.size() - 1),
            payload_checksum(data.data(), data.size()));
}

// A payload hashed in pieces that start on block boundaries, as a GPU transfer lands.
TEST(ChecksumPool, PiecesOnBlockBoundariesFillOneList) {
  const auto data = random_bytes(7 * kChecksumBlockBytes + 5, 11);
  ChecksumPool pool(2);
  std::vector<uint64_t> blocks(checksum_block_count(data.size()));
  std::vector<ChecksumPool::Pending> pieces;
  const size_t piece = 2 * kChecksumBlockBytes;
  for (size_t off = 0; off < data.size(); off += piece) {
    pieces.push_back(pool.start(data.data() + off, std::min(piece, data.size() - off),
                                blocks.data() + off / kChecksumBlockBytes));
  }
  for (auto& p : pieces) p.wait();
  EXPECT_EQ(combine_block_hashes(blocks, data.size()), checksum_by_definition(data));
}

// Several transfer threads share one pool; a Pending dropped without wait() still finishes before
// its output goes away.
TEST(ChecksumPool, ConcurrentCallersEachGetTheirOwnChecksum) {
  ChecksumPool pool(2);
  std::vector<std::vector<std::byte>> payloads;
  std::vector<uint64_t> expected;
  for (size_t i = 0; i < 8; ++i) {
    payloads.push_back(random_bytes((i + 1) * kChecksumBlockBytes / 2 + i, 100 + i));
    expected.push_back(checksum_by_definition(payloads.back()));
  }
  std::vector<std::thread> callers;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int rep = 0; rep < 25; ++rep) {
        const size_t i = static_cast<size_t>(t * 25 + rep) % payloads.size();
        if (pool.checksum(payloads[i].data(), payloads[i].size()) != expected[i]) ++wrong[t];
        std::vector<uint64_t> blocks(checksum_block_count(payloads[i].size()));
        {
          ChecksumPool::Pending dropped =
              pool.start(payloads[i].data(), payloads[i].size(), blocks.data());
        }
        if (combine_block_hashes(blocks, payloads[i].size()) != expected[i]) ++wrong[t];
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

TEST(ChecksumPool, DefaultSizeIsBounded) {
  EXPECT_GE(default_checksum_threads(), 1u);
  EXPECT_LE(default_checksum_threads(), 8u);
}

}  // namespace
}  // namespace kvplan
