#include "runtime/offload_runtime.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "controlled_backend.h"
#include "core/hash.h"
#include "runtime_test_util.h"

// GCC defines __SANITIZE_ADDRESS__/__SANITIZE_THREAD__; clang only answers __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KVPLAN_CLANG_SANITIZED 1
#endif
#endif
#ifndef KVPLAN_CLANG_SANITIZED
#define KVPLAN_CLANG_SANITIZED 0
#endif

namespace kvplan {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("kvplan_rt_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

RuntimeOptions small_options(const PlanLayout& layout, size_t device_chunks, size_t host_chunks) {
  RuntimeOptions o;
  o.backend = make_host_standin_backend();  // these tests read and write device pages directly
  o.chunk_tokens = layout.chunk_tokens();
  o.device_capacity_bytes = device_chunks * layout.chunk_bytes();
  o.host_capacity_bytes = host_chunks * stored_chunk_bytes(layout);
  o.disk_fsync = false;
  return o;
}

// Produces chunk `i` of `tokens` on the device with the key's byte pattern and stores it.
TransferStatus produce_and_store(OffloadRuntime& rt, const std::vector<uint64_t>& keys, size_t i) {
  const DeviceChunk c = rt.acquire_device(keys[i]);
  test::fill_pattern(c.data, c.bytes, keys[i]);
  const TransferStatus s = rt.store(c).get();
  rt.release(c);
  return s;
}

class OffloadRuntimeTest : public ::testing::Test {
 protected:
  Plan plan = test::mixed_plan();
  PlanLayout layout{plan, {.chunk_tokens = 32}};
  std::mt19937_64 rng{42};
};

TEST_F(OffloadRuntimeTest, StoreLookupLoadRoundTripIsByteExact) {
  OffloadRuntime rt(plan, small_options(layout, 2, 8));
  const auto tokens = test::random_tokens(rng, 32 * 4 + 5);
  const auto keys = rt.keys(tokens);
  ASSERT_EQ(keys.size(), 4u);
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(produce_and_store(rt, keys, i).ok);
  rt.flush();

  const LookupResult hit = rt.lookup(tokens);
  EXPECT_EQ(hit.prefix_chunks, 3u);
  EXPECT_EQ(hit.prefix_tokens, 96u);
  // Device holds 2 chunks: the first was evicted from it and lives on the host.
  EXPECT_EQ(hit.locations[0], Tier::kHost);
  EXPECT_EQ(hit.locations[1], Tier::kDevice);
  EXPECT_EQ(hit.locations[2], Tier::kDevice);
  EXPECT_EQ(hit.locations[3], Tier::kMiss);

  const LoadResult loaded = rt.load(tokens, 1).get();
  ASSERT_TRUE(loaded.status.ok) << loaded.status.message;
  ASSERT_EQ(loaded.chunks.size(), 1u);
  std::vector<std::byte> back(layout.chunk_bytes());
  rt.read_device(loaded.chunks[0], 0, back);
  EXPECT_EQ(test::count_pattern_mismatches(back.data(), back.size(), keys[0]), 0u);
  rt.release(loaded.chunks[0]);

  const RuntimeStats s = rt.stats();
  EXPECT_EQ(s.stores_ok, 3u);
  EXPECT_EQ(s.hits_host, 1u);
  EXPECT_EQ(s.hits_device, 2u);
  EXPECT_EQ(s.recomputed_tokens, 37u);
  EXPECT_EQ(s.bytes_device_to_host, 3 * layout.chunk_bytes());
  EXPECT_EQ(s.bytes_host_to_device, layout.chunk_bytes());
  EXPECT_EQ(s.device_to_host.transfers, 3 * layout.groups().size());  // one per group
  EXPECT_EQ(rt.count_guard_violations(), 0u);
}

TEST_F(OffloadRuntimeTest, PinnedAndInUseChunksAreNeverEvicted) {
  OffloadRuntime rt(plan, small_options(layout, 2, 2));
  const auto tokens = test::random_tokens(rng, 32 * 4);
  const auto keys = rt.keys(tokens);
  const DeviceChunk held = rt.acquire_device(keys[0]);
  test::fill_pattern(held.data, held.bytes, keys[0]);
  ASSERT_TRUE(rt.store(held).get().ok);
  ASSERT_TRUE(produce_and_store(rt, keys, 1).ok);
  ASSERT_TRUE(rt.pin(keys[1]));
  // Device: chunk 0 held by us, chunk 1 pinned -> no slot for chunk 2.
  EXPECT_FALSE(rt.try_acquire_device(keys[2]).has_value());
  // Host: both slots taken by 0 (in no use) and 1 (pinned): storing 2 evicts 0 from the host.
  rt.release(held);
  ASSERT_TRUE(produce_and_store(rt, keys, 2).ok);
  rt.flush();
  // Chunk 0 lost its device slot (to 2) and its host slot (to 2's store): the prefix is gone.
  EXPECT_EQ(rt.lookup(tokens).prefix_chunks, 0u);
  EXPECT_FALSE(rt.evict(keys[1]));  // pinned
  ASSERT_TRUE(rt.unpin(keys[1]));
  EXPECT_TRUE(rt.evict(keys[1]));
  EXPECT_EQ(rt.stats().evictions_device, 2u);  // 0 to make room, 1 explicitly
}

TEST_F(OffloadRuntimeTest, AFailedStoreIsNeverVisible) {
  OffloadRuntime rt(plan, small_options(layout, 4, 1));
  const auto tokens = test::random_tokens(rng, 64);
  const auto keys = rt.keys(tokens);
  ASSERT_TRUE(produce_and_store(rt, keys, 0).ok);
  rt.flush();
  ASSERT_TRUE(rt.pin(keys[0]));
  // Drop chunk 0's device copy is impossible while pinned, so use chunk 1: the only host slot is
  // pinned, so its store fails; the device copy stays, the host never shows it.
  const DeviceChunk c = rt.acquire_device(keys[1]);
  const TransferStatus s = rt.store(c).get();
  rt.release(c);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.code, ErrorCode::kResourceExhausted);
  EXPECT_TRUE(rt.evict(keys[1]));  // drop the device copy
  const LookupResult r = rt.lookup(tokens);
  EXPECT_EQ(r.prefix_chunks, 1u);
  EXPECT_EQ(r.locations[1], Tier::kMiss);
  EXPECT_EQ(rt.stats().stores_failed, 1u);
}

// A store's chunk may still be in flight on the producer's stream: until its fence completes a
// lookup must not report it and a load must not hand it out.
TEST_F(OffloadRuntimeTest, AChunkIsInvisibleUntilItsFenceCompletes) {
  auto backend = std::make_shared<test::ControlledBackend>();
  RuntimeOptions o = small_options(layout, 2, 4);
  o.backend = backend;
  OffloadRuntime rt(plan, o);
  const auto tokens = test::random_tokens(rng, 32);
  const auto keys = rt.keys(tokens);
  const DeviceChunk c = rt.acquire_device(keys[0]);
  const size_t half = c.bytes / 2;
  test::fill_pattern(c.data, c.bytes, keys[0]);
  std::memset(c.data + half, 0, c.bytes - half);  // the stream has written only half so far
  const DeviceFence fence = backend->record_fence(nullptr);
  const std::shared_future<TransferStatus> stored = rt.store(c, fence);
  rt.release(c);
  backend->await_waiter();  // the store worker waits on the fence

  const LookupResult early = rt.lookup(tokens);
  EXPECT_EQ(early.prefix_chunks, 0u);
  EXPECT_EQ(early.locations[0], Tier::kMiss);
  const LoadResult early_load = rt.load(tokens).get();
  EXPECT_TRUE(early_load.chunks.empty());
  for (const DeviceChunk& d : early_load.chunks) rt.release(d);
  EXPECT_FALSE(rt.evict_from(keys[0], Tier::kDevice));  // in use by the store, not evictable
  EXPECT_EQ(stored.wait_for(std::chrono::seconds(0)), std::future_status::timeout);

  std::vector<std::byte> rest(c.bytes);
  test::fill_pattern(rest.data(), rest.size(), keys[0]);
  std::memcpy(c.data + half, rest.data() + half, c.bytes - half);  // the stream finishes
  backend->complete(fence.token);
  ASSERT_TRUE(stored.get().ok);
  EXPECT_EQ(rt.lookup(tokens).locations[0], Tier::kDevice);
  const LoadResult loaded = rt.load(tokens).get();
  ASSERT_EQ(loaded.chunks.size(), 1u);
  std::vector<std::byte> back(c.bytes);
  rt.read_device(loaded.chunks[0], 0, back);
  EXPECT_EQ(test::count_pattern_mismatches(back.data(), back.size(), keys[0]), 0u);
  rt.release(loaded.chunks[0]);
  rt.flush();
  const std::span<std::byte> host = rt.host_object_bytes_for_testing(keys[0]);
  ASSERT_FALSE(host.empty());  // the host copy was taken after the fence, so it is whole too
  EXPECT_EQ(test::count_pattern_mismatches(host.data() + sizeof(StoredObjectHeader),
                                           layout.group(0).chunk_bytes, keys[0]),
            0u);
}

// A chunk the host tier already holds is stored again (produced anew on the device): the device
// copy still waits for its fence, while the host copy stays visible.
TEST_F(OffloadRuntimeTest, ADeduplicatedStoreWaitsForItsFenceToo) {
  auto backend = std::make_shared<test::ControlledBackend>();
  RuntimeOptions o = small_options(layout, 2, 4);
  o.backend = backend;
  OffloadRuntime rt(plan, o);
  const auto tokens = test::random_tokens(rng, 32);
  const auto keys = rt.keys(tokens);
  ASSERT_TRUE(produce_and_store(rt, keys, 0).ok);
  ASSERT_TRUE(rt.evict_from(keys[0], Tier::kDevice));
  const DeviceChunk c = rt.acquire_device(keys[0]);
  const DeviceFence fence = backend->record_fence(nullptr);
  const std::shared_future<TransferStatus> stored = rt.store(c, fence);
  rt.release(c);
  EXPECT_EQ(rt.lookup(tokens).locations[0], Tier::kHost);
  EXPECT_EQ(stored.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  test::fill_pattern(c.data, c.bytes, keys[0]);
  backend->complete(fence.token);
  ASSERT_TRUE(stored.get().ok);
  EXPECT_EQ(rt.lookup(tokens).locations[0], Tier::kDevice);
  EXPECT_EQ(rt.stats().stores_deduplicated, 1u);
}

// A GPU error in a copy or a fence wait fails that one store or load with the backend's error,
// counted in transfer_errors; the runtime goes on, and no half-copied chunk becomes visible.
TEST_F(OffloadRuntimeTest, AFailedCopyFailsOnlyItsOperation) {
  auto backend = std::make_shared<test::ControlledBackend>();
  RuntimeOptions o = small_options(layout, 2, 4);
  o.backend = backend;
  OffloadRuntime rt(plan, o);
  const auto tokens = test::random_tokens(rng, 32 * 3);
  const auto keys = rt.keys(tokens);

  backend->fail_next_device_to_host(1);
  TransferStatus s = produce_and_store(rt, keys, 0);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.code, ErrorCode::kInternal);
  EXPECT_NE(s.message.find("injected device error"), std::string::npos) << s.message;
  EXPECT_EQ(rt.lookup(tokens).locations[0], Tier::kDevice);  // the device copy is fine
  ASSERT_TRUE(rt.evict_from(keys[0], Tier::kDevice));
  EXPECT_EQ(rt.lookup(tokens).prefix_chunks, 0u);  // and no host copy was published
  EXPECT_EQ(rt.stats().transfer_errors, 1u);
  EXPECT_EQ(rt.stats().stores_failed, 1u);

  // The runtime goes on: the same chunk stores, and loads back byte for byte.
  ASSERT_TRUE(produce_and_store(rt, keys, 0).ok);
  ASSERT_TRUE(rt.evict_from(keys[0], Tier::kDevice));
  backend->fail_next_host_to_device(1);
  const LoadResult failed = rt.load(tokens).get();
  EXPECT_FALSE(failed.status.ok);
  EXPECT_TRUE(failed.chunks.empty());
  EXPECT_NE(failed.status.message.find("injected device error"), std::string::npos);
  EXPECT_EQ(rt.stats().transfer_errors, 2u);
  EXPECT_EQ(rt.lookup(tokens).locations[0], Tier::kHost);  // a failed copy keeps its source
  const LoadResult loaded = rt.load(tokens, 1).get();
  ASSERT_TRUE(loaded.status.ok) << loaded.status.message;
  ASSERT_EQ(loaded.chunks.size(), 1u);
  std::vector<std::byte> back(layout.chunk_bytes());
  rt.read_device(loaded.chunks[0], 0, back);
  EXPECT_EQ(test::count_pattern_mismatches(back.data(), back.size(), keys[0]), 0u);
  rt.release(loaded.chunks[0]);

  // A failed fence: the producer's writes may not have landed, so nothing is published.
  backend->fail_next_fence_waits(1);
  s = produce_and_store(rt, keys, 1);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.message.find("store fence"), std::string::npos) << s.message;
  const LookupResult r = rt.lookup(tokens);
  EXPECT_EQ(r.prefix_chunks, 1u);
  EXPECT_EQ(r.locations[1], Tier::kMiss);
  rt.release(rt.acquire_device(keys[1]));  // its slot was freed: it can be produced again
  EXPECT_EQ(rt.stats().transfer_errors, 3u);
  EXPECT_EQ(rt.stats().stores_failed, 2u);
  EXPECT_EQ(rt.count_guard_violations(), 0u);
}

class CorruptedHostByte : public OffloadRuntimeTest, public ::testing::WithParamInterface<int> {};

// With the transfer thread hashing as it copies (0) and with a pool of hashing threads (2).
TEST_P(CorruptedHostByte, IsRefusedAndCounted) {
  RuntimeOptions o = small_options(layout, 1, 4);
  o.hash_threads = GetParam();
  OffloadRuntime rt(plan, o);
  const auto tokens = test::random_tokens(rng, 64);
  const auto keys = rt.keys(tokens);
  ASSERT_TRUE(produce_and_store(rt, keys, 0).ok);
  ASSERT_TRUE(produce_and_store(rt, keys, 1).ok);  // evicts chunk 0 from the 1-slot device
  rt.flush();
  std::span<std::byte> stored = rt.host_object_bytes_for_testing(keys[0]);
  ASSERT_FALSE(stored.empty());
  stored[stored.size() - 17] ^= std::byte{0x10};  // one payload byte of the last group
  const LoadResult r = rt.load(tokens).get();
  EXPECT_FALSE(r.status.ok);
  EXPECT_EQ(r.status.code, ErrorCode::kDataLoss);
  EXPECT_EQ(r.status.refusal, RefusalReason::kChecksum);
  EXPECT_TRUE(r.chunks.empty());
  EXPECT_EQ(rt.stats().refusals, 1u);
  EXPECT_EQ(rt.stats().refusals_by_reason[static_cast<size_t>(RefusalReason::kChecksum)], 1u);
  EXPECT_EQ(rt.lookup(tokens).prefix_chunks, 0u);  // the bad copy left the tier
}
INSTANTIATE_TEST_SUITE_P(HashThreads, CorruptedHostByte, ::testing::Values(0, 2));

class DiskTierTest : public OffloadRuntimeTest {
 protected:
  TempDir dir;
  RuntimeOptions disk_options(const Plan& p) {
    const PlanLayout l(p, {.chunk_tokens = 32});
    RuntimeOptions o = small_options(l, 1, 1);
    o.disk_dir = dir.path;
    o.disk_capacity_bytes = 64 * stored_chunk_bytes(l);
    return o;
  }
  // Stores chunks 0..n-1; with one host slot, all but the last spill to disk.
  std::vector<uint64_t> fill(OffloadRuntime& rt, const std::vector<uint32_t>& tokens, size_t n) {
    const auto keys = rt.keys(tokens);
    for (size_t i = 0; i < n; ++i) EXPECT_TRUE(produce_and_store(rt, keys, i).ok);
    rt.flush();
    return keys;
  }
};

TEST_F(DiskTierTest, SpillsAndSurvivesANewProcess) {
  const auto tokens = test::random_tokens(rng, 32 * 3);
  std::vector<uint64_t> keys;
  {
    OffloadRuntime rt(plan, disk_options(plan));
    keys = fill(rt, tokens, 3);
    const LookupResult r = rt.lookup(tokens);
    EXPECT_EQ(r.locations[0], Tier::kDisk);
    EXPECT_EQ(r.locations[1], Tier::kDisk);
    EXPECT_EQ(r.locations[2], Tier::kDevice);
    EXPECT_TRUE(fs::exists(*rt.disk_path_for_testing(keys[0])));
  }
  OffloadRuntime again(plan, disk_options(plan));  // a "new process": only the disk remains
  const LookupResult r = again.lookup(tokens);
  EXPECT_EQ(r.prefix_chunks, 2u);
  const LoadResult loaded = again.load(tokens).get();
  ASSERT_EQ(loaded.chunks.size(), 1u);  // one device slot
  EXPECT_EQ(loaded.status.code, ErrorCode::kResourceExhausted);
  std::vector<std::byte> back(layout.chunk_bytes());
  again.read_device(loaded.chunks[0], 0, back);
  EXPECT_EQ(test::count_pattern_mismatches(back.data(), back.size(), keys[0]), 0u);
  again.release(loaded.chunks[0]);
  EXPECT_GT(again.stats().bytes_from_disk, 0u);
}

TEST_F(DiskTierTest, CorruptedDiskByteIsRefused) {
  const auto tokens = test::random_tokens(rng, 64);
  OffloadRuntime rt(plan, disk_options(plan));
  const auto keys = fill(rt, tokens, 2);
  const fs::path file = *rt.disk_path_for_testing(keys[0]);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    char c = 0;
    f.read(&c, 1);
    c ^= 1;
    f.seekp(200);
    f.write(&c, 1);
  }
  const LoadResult r = rt.load(tokens).get();
  EXPECT_EQ(r.status.refusal, RefusalReason::kChecksum);
  EXPECT_EQ(rt.stats().refusals, 1u);
  EXPECT_FALSE(fs::exists(file));
}

// A chunk file of the wrong size (cut short, or grown by another program) is refused before any
// header is read; an oversized one is never read into memory whole (DiskTier::read's cap).
TEST_F(DiskTierTest, WrongSizedDiskFilesAreRefused) {
  OffloadRuntime rt(plan, disk_options(plan));
  const auto grown_tokens = test::random_tokens(rng, 64);
  const auto grown = fill(rt, grown_tokens, 2);
  const fs::path grown_file = *rt.disk_path_for_testing(grown[0]);
  fs::resize_file(grown_file, uint64_t{1} << 36);  // sparse 64 GiB
  LoadResult r = rt.load(grown_tokens).get();
  EXPECT_EQ(r.status.refusal, RefusalReason::kPayloadBytes);
  EXPECT_LE(rt.stats().bytes_from_disk, stored_chunk_bytes(layout) + 1);

  const auto cut_tokens = test::random_tokens(rng, 64);
  const auto cut = fill(rt, cut_tokens, 2);
  const fs::path cut_file = *rt.disk_path_for_testing(cut[0]);
  fs::resize_file(cut_file, fs::file_size(cut_file) - 1);
  r = rt.load(cut_tokens).get();
  EXPECT_EQ(r.status.refusal, RefusalReason::kTruncated);
  EXPECT_EQ(r.status.code, ErrorCode::kDataLoss);
  EXPECT_EQ(r.status.message,
            "chunk " + hash_hex(cut[0]) + " from the disk tier refused: truncated mismatch");
  EXPECT_FALSE(fs::exists(cut_file));
  EXPECT_EQ(rt.stats().refusals, 2u);
}

TEST_F(DiskTierTest, AnotherPlansObjectIsRefused) {
  const auto tokens = test::random_tokens(rng, 64);
  Plan other = plan;
  other.layers[2].pair = KvPair::parse("K4V8");  // same sizes, other bytes
  TempDir other_dir;
  RuntimeOptions oo = disk_options(other);
  oo.disk_dir = other_dir.path;
  OffloadRuntime writer(other, oo);
  const auto other_keys = fill(writer, tokens, 2);

  {
    // Keys (and disk subdirectories) already separate plans; force a collision.
    OffloadRuntime rt(plan, disk_options(plan));
    const auto keys = rt.keys(tokens);
    ASSERT_NE(keys[0], other_keys[0]);
    fs::copy_file(*writer.disk_path_for_testing(other_keys[0]), *rt.disk_path_for_testing(keys[0]));
  }
  OffloadRuntime reader(plan, disk_options(plan));
  const LoadResult r = reader.load(tokens).get();
  EXPECT_EQ(r.status.refusal, RefusalReason::kPlan);
  EXPECT_TRUE(r.chunks.empty());
  EXPECT_EQ(reader.stats().refusals, 1u);
}

TEST_F(DiskTierTest, AnotherFormatVersionIsRefused) {
  const auto tokens = test::random_tokens(rng, 64);
  std::vector<uint64_t> keys;
  fs::path file;
  {
    OffloadRuntime rt(plan, disk_options(plan));
    keys = fill(rt, tokens, 2);
    file = *rt.disk_path_for_testing(keys[0]);
  }
  // Rewrite group 1's header as a build with a newer q4_0 would have: valid, sealed, different.
  std::vector<char> bytes(fs::file_size(file));
  std::ifstream(file, std::ios::binary)
      .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const size_t rec1 = sizeof(StoredObjectHeader) + layout.group(0).chunk_bytes;
  StoredObjectHeader h;
  std::memcpy(&h, bytes.data() + rec1, sizeof h);
  ASSERT_EQ(h.transfer_group, 1);
  h.key_format_version += 1;
  seal_object_header(h);
  std::memcpy(bytes.data() + rec1, &h, sizeof h);
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  OffloadRuntime rt(plan, disk_options(plan));
  const LoadResult r = rt.load(tokens).get();
  EXPECT_EQ(r.status.refusal, RefusalReason::kFormatVersion);
  EXPECT_TRUE(r.chunks.empty());
  EXPECT_EQ(rt.stats().refusals_by_reason[static_cast<size_t>(RefusalReason::kFormatVersion)], 1u);
  EXPECT_EQ(rt.count_guard_violations(), 0u);
}

TEST_F(OffloadRuntimeTest, RefusesAPlanForAnotherModel) {
  RuntimeOptions o = small_options(layout, 1, 1);
  o.model_geometry = KvGeometry::uniform("m", 5, 4, 64);
  EXPECT_THROW(OffloadRuntime(plan, o), Error);
  o.model_geometry.reset();
  o.model_fingerprint = "0000000000000001";
  EXPECT_THROW(OffloadRuntime(plan, o), Error);
  o.model_fingerprint.clear();
  o.host_capacity_bytes = 10;
  EXPECT_THROW(OffloadRuntime(plan, o), Error);
}

TEST_F(OffloadRuntimeTest, HashThreadsOutOfRangeAreRefused) {
  RuntimeOptions o = small_options(layout, 1, 1);
  for (const int bad : {-2, 257}) {
    o.hash_threads = bad;
    try {
      OffloadRuntime rt(plan, o);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("hash_threads"), std::string::npos) << e.what();
    }
  }
}

TEST(TransferFit, RecoversALine) {
  LinearTransferFit fit;
  for (int i = 1; i <= 10; ++i) fit.add(i * 1e6, 5e-6 + i * 1e6 / 2e10);
  const TransferFitResult r = fit.result();
  EXPECT_NEAR(r.t0_seconds, 5e-6, 1e-9);
  EXPECT_NEAR(r.bytes_per_second, 2e10, 2e10 * 1e-6);
}

// Two noisy sizes whose line crosses zero time above zero bytes: the fixed cost is clamped to 0
// and the rate refitted through the origin, sum(B t) / sum(B^2).
TEST(TransferFit, FixedCostIsNeverNegative) {
  LinearTransferFit fit;
  fit.add(1e6, 1e-4);
  fit.add(2e6, 2.5e-4);
  const TransferFitResult r = fit.result();
  EXPECT_EQ(r.t0_seconds, 0.0);
  EXPECT_NEAR(r.bytes_per_second, 5e12 / 600.0, 1.0);
}

TEST(PinnedMemory, IsLockedOrRefused) {
  // CI runs as root, so 1 MiB locks; the failure path is the error message, not a fallback.
  std::byte* p = allocate_locked_pages(1 << 20);
  ASSERT_NE(p, nullptr);
  std::ifstream status("/proc/self/status");
  std::string line;
  long locked_kb = -1;
  while (std::getline(status, line)) {
    if (line.rfind("VmLck:", 0) == 0) locked_kb = std::stol(line.substr(6));
  }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || KVPLAN_CLANG_SANITIZED
  (void)locked_kb;  // the sanitizers intercept mlock as a no-op, so VmLck stays 0 there
#else
  EXPECT_GE(locked_kb, 1024);
#endif
  free_locked_pages(p, 1 << 20);
}

}  // namespace
}  // namespace kvplan

namespace kvplan {
namespace {

// With host payload checksums off, the checksum is computed when a chunk spills, so disk objects
// still round-trip and a corrupted disk byte is still refused.
TEST_F(DiskTierTest, UnverifiedHostTierStillSealsDiskObjects) {
  const auto tokens = test::random_tokens(rng, 32 * 3);
  RuntimeOptions o = disk_options(plan);
  o.verify_host_payloads = false;
  o.device_capacity_bytes = 2 * layout.chunk_bytes();
  OffloadRuntime rt(plan, o);
  const auto keys = fill(rt, tokens, 3);  // 0 and 1 spill to disk
  const LoadResult ok = rt.load(tokens, 1).get();
  ASSERT_TRUE(ok.status.ok) << ok.status.message;
  ASSERT_EQ(ok.chunks.size(), 1u);
  std::vector<std::byte> back(layout.chunk_bytes());
  rt.read_device(ok.chunks[0], 0, back);
  EXPECT_EQ(test::count_pattern_mismatches(back.data(), back.size(), keys[0]), 0u);
  rt.release(ok.chunks[0]);
  {
    std::fstream f(*rt.disk_path_for_testing(keys[1]),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(300);
    f.put('\x5a');
  }
  ASSERT_TRUE(rt.evict_from(keys[0], Tier::kDevice));
  // Chunk 0 is still on disk; chunk 1's file is corrupt.
  const LoadResult bad = rt.load(tokens).get();
  EXPECT_EQ(bad.chunks.size(), 1u);
  EXPECT_EQ(bad.status.refusal, RefusalReason::kChecksum);
  for (const DeviceChunk& c : bad.chunks) rt.release(c);
}

}  // namespace
}  // namespace kvplan
