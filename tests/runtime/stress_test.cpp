// Randomized concurrent stress of the offload runtime: 4 threads store, look up, load, pin and
// evict chunks of a mixed bf16 + packed plan through device, host and disk tiers that are far too
// small to hold them, checking every loaded byte and every guard byte; and readers racing stores
// whose producer fences are still pending.
//
// Default: 100k operations (CI). The full run:
//   KVPLAN_STRESS_OPS=1000000 build-rt/tests/runtime/kvplan_runtime_stress_test
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <optional>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "controlled_backend.h"
#include "runtime/gpu_device_backend.h"
#include "runtime/offload_runtime.h"
#include "runtime_test_util.h"

namespace kvplan {
namespace {

constexpr int kThreads = 4;
constexpr size_t kSequences = 48;
constexpr size_t kChunksPerSequence = 6;
constexpr size_t kChunkTokens = 16;

uint64_t ops_from_env() {
  const char* env = std::getenv("KVPLAN_STRESS_OPS");
  return env != nullptr && *env ? std::strtoull(env, nullptr, 10) : 100000;
}

TEST(RuntimeStress, RandomOpsKeepEveryByte) {
  const uint64_t total_ops = ops_from_env();
  const Plan plan = test::mixed_plan(/*n_kv_heads=*/1, /*head_dim=*/32, /*block_size=*/16);
  const PlanLayout layout(plan, {.chunk_tokens = kChunkTokens});
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kvplan_stress_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  RuntimeOptions o;
  o.chunk_tokens = kChunkTokens;
  o.device_capacity_bytes = 20 * layout.chunk_bytes();
  o.host_capacity_bytes = 40 * stored_chunk_bytes(layout);
  o.disk_dir = dir;
  o.disk_capacity_bytes = 80 * stored_chunk_bytes(layout);
  o.disk_fsync = false;
  // Two hashing threads next to the transfer workers, so the ChecksumPool shares in the stress
  // (and the ThreadSanitizer run); KVPLAN_STRESS_HASH_THREADS=0 runs the fused single-thread path.
  const char* hash_threads = std::getenv("KVPLAN_STRESS_HASH_THREADS");
  o.hash_threads = hash_threads != nullptr && *hash_threads ? std::atoi(hash_threads) : 2;
  // KVPLAN_STRESS_BACKEND=gpu runs the same operations on GPU pages (scripts/gpu-check.sh).
  const char* backend = std::getenv("KVPLAN_STRESS_BACKEND");
  if (backend != nullptr && std::string_view(backend) == "gpu")
    o.backend = make_gpu_device_backend(0);
  auto rt = std::make_unique<OffloadRuntime>(plan, o);

  // Sequences share prefixes: 8 roots, each sequence continues one of them after 2 chunks.
  std::mt19937_64 seed_rng(2024);
  std::vector<std::vector<uint32_t>> roots(8);
  for (auto& r : roots) r = test::random_tokens(seed_rng, 2 * kChunkTokens);
  std::vector<std::vector<uint32_t>> seqs(kSequences);
  std::vector<std::vector<uint64_t>> seq_keys(kSequences);
  for (size_t s = 0; s < kSequences; ++s) {
    seqs[s] = roots[s % roots.size()];
    const auto tail = test::random_tokens(seed_rng, (kChunksPerSequence - 2) * kChunkTokens + 3);
    seqs[s].insert(seqs[s].end(), tail.begin(), tail.end());
    seq_keys[s] = rt->keys(seqs[s]);
  }

  std::atomic<uint64_t> mismatches{0}, loaded_chunks{0}, stores{0}, lookups{0}, loads{0}, evicts{0},
      pins{0}, prefix_errors{0};
  auto worker = [&](int t) {
    std::mt19937_64 rng(1000 + t);
    std::deque<std::shared_future<TransferStatus>> pending;
    std::vector<uint64_t> pinned;
    std::vector<std::byte> buf(layout.chunk_bytes());
    const uint64_t my_ops = total_ops / kThreads + (t < static_cast<int>(total_ops % kThreads));
    for (uint64_t op = 0; op < my_ops; ++op) {
      const size_t s = rng() % kSequences;
      const unsigned dice = static_cast<unsigned>(rng() % 100);
      if (dice < 35) {  // produce a chunk whose prefix is cached (as a serving engine would)
        const size_t i = rng() % seq_keys[s].size();
        const uint64_t key = seq_keys[s][i];
        if (std::optional<DeviceChunk> c = rt->try_acquire_device(key)) {
          // Through write_device, not c->data: the same test runs on a GPU backend's pages.
          test::fill_pattern(buf.data(), buf.size(), key);
          rt->write_device(*c, 0, buf);
          pending.push_back(rt->store(*c));
          rt->release(*c);
        }
        stores.fetch_add(1, std::memory_order_relaxed);
      } else if (dice < 65) {
        const LookupResult r = rt->lookup(seqs[s]);
        for (size_t i = 0; i < r.locations.size(); ++i) {
          if ((i < r.prefix_chunks) != (r.locations[i] != Tier::kMiss)) prefix_errors++;
        }
        lookups.fetch_add(1, std::memory_order_relaxed);
      } else if (dice < 88) {
        const LoadResult r = rt->load(seqs[s], 1 + rng() % kChunksPerSequence).get();
        for (size_t i = 0; i < r.chunks.size(); ++i) {
          const DeviceChunk& c = r.chunks[i];
          if (c.key != seq_keys[s][i]) prefix_errors++;
          rt->read_device(c, 0, buf);
          mismatches += test::count_pattern_mismatches(buf.data(), buf.size(), c.key);
          rt->release(c);
        }
        if (!r.status.ok && r.status.code != ErrorCode::kResourceExhausted) prefix_errors++;
        loaded_chunks += r.chunks.size();
        loads.fetch_add(1, std::memory_order_relaxed);
      } else if (dice < 94) {
        (void)rt->evict(seq_keys[s][rng() % seq_keys[s].size()]);
        evicts.fetch_add(1, std::memory_order_relaxed);
      } else {
        if (pinned.size() < 2 && rng() % 2 == 0) {
          const uint64_t key = seq_keys[s][rng() % seq_keys[s].size()];
          if (rt->pin(key)) pinned.push_back(key);
        } else if (!pinned.empty()) {
          EXPECT_TRUE(rt->unpin(pinned.back()));
          pinned.pop_back();
        }
        pins.fetch_add(1, std::memory_order_relaxed);
      }
      while (pending.size() > 8 ||
             (!pending.empty() &&
              pending.front().wait_for(std::chrono::seconds(0)) == std::future_status::ready)) {
        const TransferStatus st = pending.front().get();
        // Only "every host slot is pinned or in use" may fail a store.
        if (!st.ok && st.code != ErrorCode::kResourceExhausted) prefix_errors++;
        pending.pop_front();
      }
    }
    for (auto& f : pending) (void)f.get();
    for (uint64_t key : pinned) rt->unpin(key);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  rt->flush();

  const RuntimeStats st = rt->stats();
  const uint64_t ops = stores + lookups + loads + evicts + pins;
  std::printf(
      "stress: %llu ops (%llu store, %llu lookup, %llu load, %llu evict, %llu pin/unpin), "
      "%llu chunks loaded and checked, %llu byte mismatches, %llu guard violations\n"
      "        stores ok %llu failed %llu dedup %llu; evictions device %llu host %llu disk %llu; "
      "hits device %llu host %llu disk %llu; refusals %llu\n",
      (unsigned long long)ops, (unsigned long long)stores.load(),
      (unsigned long long)lookups.load(), (unsigned long long)loads.load(),
      (unsigned long long)evicts.load(), (unsigned long long)pins.load(),
      (unsigned long long)loaded_chunks.load(), (unsigned long long)mismatches.load(),
      (unsigned long long)rt->count_guard_violations(), (unsigned long long)st.stores_ok,
      (unsigned long long)st.stores_failed, (unsigned long long)st.stores_deduplicated,
      (unsigned long long)st.evictions_device, (unsigned long long)st.evictions_host,
      (unsigned long long)st.evictions_disk, (unsigned long long)st.hits_device,
      (unsigned long long)st.hits_host, (unsigned long long)st.hits_disk,
      (unsigned long long)st.refusals);
  EXPECT_EQ(ops, total_ops);
  EXPECT_EQ(mismatches.load(), 0u);
  EXPECT_EQ(prefix_errors.load(), 0u);
  EXPECT_EQ(rt->count_guard_violations(), 0u);
  EXPECT_EQ(st.refusals, 0u);
  // The capacities are small enough that every tier evicted, and chunks came back from each.
  EXPECT_GT(st.evictions_device, 0u);
  EXPECT_GT(st.evictions_host, 0u);
  EXPECT_GT(loaded_chunks.load(), 0u);
  rt.reset();
  std::filesystem::remove_all(dir);
}

// Readers look up and load a chunk while its store waits on the producer's fence, and the producer
// finishes writing the pages only after the readers have made two passes each on average: no
// reader may see the chunk on the device before the fence completed, nor load anything but its
// whole byte pattern. (Under ThreadSanitizer a reader that read pages still being written would
// also be a reported race.)
TEST(RuntimeStress, NoReaderSeesAChunkBeforeItsFence) {
  constexpr int kReaders = 3;
  constexpr size_t kRounds = 200;
  const Plan plan = test::mixed_plan(/*n_kv_heads=*/1, /*head_dim=*/32, /*block_size=*/16);
  const PlanLayout layout(plan, {.chunk_tokens = kChunkTokens});
  auto backend = std::make_shared<test::ControlledBackend>();
  RuntimeOptions o;
  o.backend = backend;
  o.chunk_tokens = kChunkTokens;
  o.device_capacity_bytes = 8 * layout.chunk_bytes();
  o.host_capacity_bytes = 16 * stored_chunk_bytes(layout);
  OffloadRuntime rt(plan, o);

  std::mt19937_64 rng(77);
  std::vector<std::vector<uint32_t>> seqs(kRounds);
  std::vector<uint64_t> keys(kRounds);
  for (size_t r = 0; r < kRounds; ++r) {
    seqs[r] = test::random_tokens(rng, kChunkTokens);
    keys[r] = rt.keys(seqs[r]).at(0);
  }
  std::vector<uint64_t> fences(kRounds, 0);  // written before `round` publishes r
  std::atomic<size_t> round{SIZE_MAX};
  std::atomic<uint64_t> looks{0}, early{0}, mismatches{0}, seen_on_device{0};
  std::atomic<bool> stop{false};

  auto reader = [&] {
    std::vector<std::byte> buf(layout.chunk_bytes());
    while (!stop.load()) {
      const size_t r = round.load();
      if (r == SIZE_MAX) continue;
      const LookupResult l = rt.lookup(seqs[r]);
      if (l.locations[0] == Tier::kDevice) {
        seen_on_device++;
        if (!backend->completed(fences[r])) early++;
      }
      const LoadResult loaded = rt.load(seqs[r]).get();
      for (const DeviceChunk& c : loaded.chunks) {
        if (!backend->completed(fences[r])) early++;
        rt.read_device(c, 0, buf);
        mismatches += test::count_pattern_mismatches(buf.data(), buf.size(), c.key);
        rt.release(c);
      }
      looks++;
    }
  };
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) readers.emplace_back(reader);

  std::vector<std::byte> pattern(layout.chunk_bytes());
  const size_t half = pattern.size() / 2;
  for (size_t r = 0; r < kRounds; ++r) {
    std::optional<DeviceChunk> c;
    while (!(c = rt.try_acquire_device(keys[r]))) std::this_thread::yield();  // readers hold slots
    test::fill_pattern(pattern.data(), pattern.size(), keys[r]);
    std::memcpy(c->data, pattern.data(), half);
    fences[r] = backend->record_fence(nullptr).token;
    round.store(r);
    const std::shared_future<TransferStatus> stored = rt.store(*c, {nullptr, fences[r]});
    rt.release(*c);
    const uint64_t before = looks.load();
    while (looks.load() < before + 2 * kReaders) std::this_thread::yield();
    std::memcpy(c->data + half, pattern.data() + half, pattern.size() - half);
    backend->complete(fences[r]);
    EXPECT_TRUE(stored.get().ok);
    // Some reader then makes a whole pass after the publication, and must find the chunk.
    const uint64_t published = looks.load();
    while (looks.load() < published + 2 * kReaders) std::this_thread::yield();
  }
  stop.store(true);
  for (auto& th : readers) th.join();
  rt.flush();
  std::printf("fence stress: %zu rounds, %llu reader passes, %llu device sightings\n", kRounds,
              (unsigned long long)looks.load(), (unsigned long long)seen_on_device.load());
  EXPECT_EQ(early.load(), 0u);
  EXPECT_EQ(mismatches.load(), 0u);
  EXPECT_GE(seen_on_device.load(), kRounds);  // and they did see every chunk once published
  EXPECT_EQ(rt.count_guard_violations(), 0u);
}

}  // namespace
}  // namespace kvplan
