// The runtime's disk tier as a whole: one subdirectory per plan, one runtime per subdirectory, and
// every host eviction accounted for when the disk fails writes.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "runtime/offload_runtime.h"
#include "runtime_test_util.h"

namespace kvplan {
namespace {

namespace fs = std::filesystem;

class RuntimeDiskTest : public ::testing::Test {
 protected:
  Plan plan = test::mixed_plan();
  PlanLayout layout{plan, {.chunk_tokens = 32}};
  std::mt19937_64 rng{7};
  fs::path root;

  void SetUp() override {
    root = fs::temp_directory_path() /
           ("kvplan_rt_disk_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
  }
  void TearDown() override { fs::remove_all(root); }

  // One device and one host slot: every store but the last spills the previous chunk to disk.
  RuntimeOptions options(const Plan& p, size_t disk_chunks) const {
    const PlanLayout l(p, {.chunk_tokens = 32});
    RuntimeOptions o;
    o.backend = make_host_standin_backend();
    o.chunk_tokens = 32;
    o.device_capacity_bytes = l.chunk_bytes();
    o.host_capacity_bytes = stored_chunk_bytes(l);
    o.disk_dir = root;
    o.disk_capacity_bytes = disk_chunks * stored_chunk_bytes(l);
    o.disk_fsync = false;
    return o;
  }
  static TransferStatus store(OffloadRuntime& rt, uint64_t key) {
    const DeviceChunk c = rt.acquire_device(key);
    test::fill_pattern(c.data, c.bytes, key);
    const TransferStatus s = rt.store(c).get();
    rt.release(c);
    return s;
  }
  static size_t count_files(const fs::path& dir, std::string_view ending) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.path().string().ends_with(ending);
    return n;
  }
};

// Two plans' runtimes share a cache root: each has its own subdirectory, so the one with little
// disk room evicts only its own files, and the other plan's cache is whole after a restart.
TEST_F(RuntimeDiskTest, PlansSharingADirectoryKeepTheirOwnFiles) {
  Plan other = plan;
  other.layers[2].pair = KvPair::parse("K4V8");
  const auto tokens = test::random_tokens(rng, 32 * 4);
  fs::path plan_dir;
  {
    OffloadRuntime a(plan, options(plan, 64));
    for (const uint64_t key : a.keys(tokens)) ASSERT_TRUE(store(a, key).ok);
    a.flush();
    plan_dir = a.disk_path_for_testing(0)->parent_path();
    EXPECT_EQ(count_files(plan_dir, ".kvchunk"), 3u);
  }
  {
    OffloadRuntime b(other, options(other, 2));
    const fs::path other_dir = b.disk_path_for_testing(0)->parent_path();
    EXPECT_NE(other_dir, plan_dir);
    EXPECT_EQ(other_dir.parent_path(), root);
    for (const uint64_t key : b.keys(test::random_tokens(rng, 32 * 6))) {
      ASSERT_TRUE(store(b, key).ok);
    }
    b.flush();
    EXPECT_EQ(b.stats().evictions_disk, 3u);  // 5 spills into room for 2
    EXPECT_EQ(count_files(other_dir, ".kvchunk"), 2u);
  }
  EXPECT_EQ(count_files(plan_dir, ".kvchunk"), 3u);
  OffloadRuntime again(plan, options(plan, 64));
  const LookupResult r = again.lookup(tokens);
  EXPECT_EQ(r.prefix_chunks, 3u);
  EXPECT_EQ(r.locations[0], Tier::kDisk);
}

// One runtime per plan subdirectory: a second one on the same plan and root is refused with an
// error naming the lock, while the first lives; another plan on the same root is not.
TEST_F(RuntimeDiskTest, ASecondRuntimeOnTheSamePlanAndDirectoryIsRefused) {
  Plan other = plan;
  other.layers[2].pair = KvPair::parse("K4V8");
  {
    OffloadRuntime first(plan, options(plan, 4));
    try {
      OffloadRuntime second(plan, options(plan, 4));
      ADD_FAILURE() << "a second runtime shared the disk directory";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
      const std::string what = e.what();
      EXPECT_NE(what.find("in use by another runtime"), std::string::npos) << what;
      EXPECT_NE(what.find((first.disk_path_for_testing(0)->parent_path() / "lock").string()),
                std::string::npos)
          << what;
    }
    OffloadRuntime other_plan(other, options(other, 4));
  }
  OffloadRuntime after(plan, options(plan, 4));  // the lock went with the first runtime
}

// A disk that fails writes (ENOSPC on every third spill and on all of the last ones): every chunk
// evicted from the host tier either lands on disk or is counted as dropped, nothing half-written
// stays behind, and what landed loads back byte for byte.
TEST_F(RuntimeDiskTest, AFullDiskDropsAndCountsWhatItCannotSpill) {
  constexpr size_t kChunks = 20;
  std::atomic<bool> full{false};
  std::atomic<uint64_t> injected{0};
  RuntimeOptions o = options(plan, 64);
  o.disk_io_hook = [&](DiskIoStep step) {
    if (step != DiskIoStep::kWrite || !full.load()) return 0;
    ++injected;
    return ENOSPC;
  };
  OffloadRuntime rt(plan, o);
  std::vector<std::vector<uint32_t>> seqs(kChunks);
  std::vector<uint64_t> keys(kChunks);
  for (size_t i = 0; i < kChunks; ++i) {
    seqs[i] = test::random_tokens(rng, 32);
    keys[i] = rt.keys(seqs[i]).at(0);
    full = i % 3 == 0 || i >= 15;  // the spill during store i is of chunk i - 1
    ASSERT_TRUE(store(rt, keys[i]).ok);
  }
  rt.flush();

  const RuntimeStats st = rt.stats();
  EXPECT_EQ(st.evictions_host, kChunks - 1);  // the host tier holds one chunk
  EXPECT_EQ(st.spills_landed + st.spills_dropped, st.evictions_host);
  EXPECT_EQ(st.spill_write_failures, injected.load());
  EXPECT_EQ(st.spills_dropped, injected.load());
  EXPECT_EQ(injected.load(), 9u);  // the spills during stores 3, 6, 9, 12 and 15..19
  const fs::path dir = rt.disk_path_for_testing(0)->parent_path();
  EXPECT_EQ(count_files(dir, ".kvchunk"), st.spills_landed);
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }

  size_t on_disk = 0, missing = 0;
  std::vector<std::byte> back(layout.chunk_bytes());
  for (size_t i = 0; i < kChunks; ++i) {
    const Tier where = rt.lookup(seqs[i]).locations[0];
    if (where == Tier::kMiss) {
      ++missing;
      continue;
    }
    on_disk += where == Tier::kDisk;
    const LoadResult loaded = rt.load(seqs[i]).get();
    ASSERT_EQ(loaded.chunks.size(), 1u) << loaded.status.message;
    rt.read_device(loaded.chunks[0], 0, back);
    EXPECT_EQ(test::count_pattern_mismatches(back.data(), back.size(), keys[i]), 0u) << i;
    rt.release(loaded.chunks[0]);
  }
  EXPECT_EQ(missing, st.spills_dropped);
  EXPECT_EQ(on_disk, st.spills_landed);
}

}  // namespace
}  // namespace kvplan
