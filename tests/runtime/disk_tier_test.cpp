#include "runtime/disk_tier.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

const DiskTierOptions kUnsynced{.fsync = false, .io_hook = {}};

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvplan_disk_tier_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(DiskTier, WriteThenReadGivesTheBytes) {
  const DiskTier disk(fresh_dir("roundtrip"), kUnsynced);
  const std::vector<std::byte> bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
  disk.write(42, bytes);
  EXPECT_EQ(disk.read(42, bytes.size()), bytes);
  EXPECT_EQ(disk.read(43, bytes.size()), std::nullopt);
}

// A chunk file may be anything another program left in the cache directory: a huge one must not
// be read into memory whole (the reader expects `max_bytes` and refuses what is longer).
TEST(DiskTier, ReadStopsOneBytePastTheExpectedSize) {
  const DiskTier disk(fresh_dir("oversized"), kUnsynced);
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

std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The file's data is synced before the rename publishes it, and the directory after, so a chunk
// the runtime counts as landed survives a crash.
TEST(DiskTier, PublishSyncsTheFileThenTheDirectory) {
  using S = DiskIoStep;
  std::vector<DiskIoStep> steps;
  const auto record = [&](DiskIoStep s) {
    steps.push_back(s);
    return 0;
  };
  const std::vector<std::byte> bytes(1000, std::byte{9});
  {
    const DiskTier disk(fresh_dir("sync"), {.fsync = true, .io_hook = record});
    disk.write(1, bytes);
    EXPECT_EQ(steps,
              (std::vector<S>{S::kCreate, S::kWrite, S::kSyncFile, S::kRename, S::kSyncDirectory}));
    EXPECT_EQ(disk.read(1, bytes.size()), bytes);
  }
  steps.clear();
  const DiskTier unsynced(fresh_dir("nosync"), {.fsync = false, .io_hook = record});
  unsynced.write(1, bytes);
  EXPECT_EQ(steps, (std::vector<S>{S::kCreate, S::kWrite, S::kRename}));
}

// Whichever step fails (ENOSPC while writing, EIO syncing the directory, ...), write() reports it
// naming the file and the system's reason, and leaves neither the chunk nor a temporary file.
TEST(DiskTier, AFailedStepLeavesNoFile) {
  for (const DiskIoStep failing : {DiskIoStep::kCreate, DiskIoStep::kWrite, DiskIoStep::kSyncFile,
                                   DiskIoStep::kRename, DiskIoStep::kSyncDirectory}) {
    const int err = failing == DiskIoStep::kWrite ? ENOSPC : EIO;
    const auto dir = fresh_dir("fail" + std::to_string(static_cast<int>(failing)));
    const DiskTier disk(
        dir, {.fsync = true, .io_hook = [&](DiskIoStep s) { return s == failing ? err : 0; }});
    try {
      disk.write(5, std::vector<std::byte>(100, std::byte{1}));
      ADD_FAILURE() << "step " << static_cast<int>(failing) << " failed silently";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kIo);
      EXPECT_NE(std::string(e.what()).find(std::strerror(err)), std::string::npos) << e.what();
    }
    EXPECT_EQ(entries(dir), std::vector<std::string>{"lock"});
    std::filesystem::remove_all(dir);
  }
}

// One DiskTier per directory: the flock is per open file, so a second object is refused in this
// process as in another, until the first is gone.
TEST(DiskTier, ASecondTierOnTheSameDirectoryIsRefused) {
  const auto dir = fresh_dir("locked");
  {
    const DiskTier first(dir, kUnsynced);
    try {
      const DiskTier second(dir, kUnsynced);
      ADD_FAILURE() << "two disk tiers share " << dir;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
      EXPECT_NE(std::string(e.what()).find((dir / "lock").string()), std::string::npos);
    }
  }
  const DiskTier after(dir, kUnsynced);
  std::filesystem::remove_all(dir);
}

// A crashed writer's temporary files are removed when the next owner of the directory scans it;
// chunk files are adopted and anything else is left alone.
TEST(DiskTier, ScanAdoptsChunksAndRemovesUnfinishedWrites) {
  const auto dir = fresh_dir("scan");
  const DiskTier disk(dir, kUnsynced);
  disk.write(0xabcdef, std::vector<std::byte>(10, std::byte{2}));
  const std::string temp = disk.path_of(0x1234).filename().string() + ".tmp.99999.3";
  std::ofstream(dir / temp) << "half";
  std::ofstream(dir / "notes.txt") << "not ours";
  EXPECT_EQ(disk.scan(), std::vector<uint64_t>{0xabcdef});
  EXPECT_EQ(entries(dir),
            (std::vector<std::string>{"0000000000abcdef.kvchunk", "lock", "notes.txt"}));
  std::filesystem::remove_all(dir);
}

TEST(DiskTier, PlanDirectoryNamesPlanAndModel) {
  EXPECT_EQ(DiskTier::plan_directory("/cache", 0x1234, 0xabcd),
            std::filesystem::path("/cache/0000000000001234-000000000000abcd"));
}

}  // namespace
}  // namespace kvplan
