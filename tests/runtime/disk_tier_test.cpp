#include "runtime/disk_tier.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace kvplan {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvplan_disk_tier_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(DiskTier, WriteThenReadGivesTheBytes) {
  const DiskTier disk(fresh_dir("roundtrip"), {.fsync = false});
  const std::vector<std::byte> bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
  disk.write(42, bytes);
  EXPECT_EQ(disk.read(42, bytes.size()), bytes);
  EXPECT_EQ(disk.read(43, bytes.size()), std::nullopt);
}

// A chunk file may be anything another program left in the cache directory: a huge one must not
// be read into memory whole (the reader expects `max_bytes` and refuses what is longer).
TEST(DiskTier, ReadStopsOneBytePastTheExpectedSize) {
  const DiskTier disk(fresh_dir("oversized"), {.fsync = false});
  {
    std::ofstream out(disk.path_of(7), std::ios::binary);
    out.seekp((std::streamoff{1} << 32) - 1);  // a sparse 4 GiB file
    out.put('x');
  }
  const auto bytes = disk.read(7, 1000);
  ASSERT_TRUE(bytes.has_value());
  EXPECT_EQ(bytes->size(), 1001u);
  std::filesystem::remove_all(disk.dir());
}

}  // namespace
}  // namespace kvplan
