// kvplan_bench_runtime: host-tier store + load bandwidth against memcpy measured in the same run,
// and lookups per second with 1M cached chunks. A program that prints numbers, not a timed test.
//
//   build-rt/tests/runtime/kvplan_bench_runtime [lookup_chunks (default 1000000)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/gpu_runtime.h"
#include "runtime/gpu_device_backend.h"
#include "runtime/offload_runtime.h"
#include "runtime/runtime_test_util.h"  // tests/runtime

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

kvplan::Plan bench_plan(int layers, int heads, int dim, const char* edges, const char* middle) {
  kvplan::Plan p;
  p.tool_version = "bench";
  p.created = "2026-01-01T00:00:00Z";
  p.model.name = "bench";
  p.model.architecture = "llama";
  p.model.n_attention_heads = heads * 4;
  p.model.geometry = kvplan::KvGeometry::uniform("bench", layers, heads, dim);
  p.quantization.block_size = 16;
  for (int l = 0; l < layers; ++l) {
    const bool edge = l < 2 || l >= layers - 2;
    p.layers.push_back({l, 0, kvplan::KvPair::parse(edge ? edges : middle)});
  }
  return p;
}

// 64 chunks of 256 tokens of a MiniMax-like layout (8 KV heads x 128; bf16 edge layers, q4_0
// middle layers), sized so every chunk fits on the device and on the host at once.
constexpr size_t kBandwidthChunks = 64;
const kvplan::Plan& bandwidth_plan() {
  static const kvplan::Plan plan = bench_plan(16, 8, 128, "KV16", "q4_0/q4_0");
  return plan;
}
kvplan::RuntimeOptions bandwidth_options(const kvplan::PlanLayout& layout,
                                         std::shared_ptr<kvplan::DeviceBackend> backend) {
  kvplan::RuntimeOptions o;
  o.chunk_tokens = 256;
  o.device_capacity_bytes = (kBandwidthChunks + 1) * layout.chunk_bytes();
  o.host_capacity_bytes = (kBandwidthChunks + 1) * kvplan::stored_chunk_bytes(layout);
  o.backend = std::move(backend);
  return o;
}

// Best-of-5 seconds to store every chunk (device -> host) and load them back (host -> device),
// the bytes checked after each load, and a same-run reference copy of the same bytes both ways.
struct RoundTrip {
  double reference_s = 1e30, store_s = 1e30, load_s = 1e30;
  uint64_t mismatches = 0;
};
template <typename ReferenceCopy>
RoundTrip time_round_trips(kvplan::OffloadRuntime& rt, const ReferenceCopy& reference_copy) {
  const size_t n = kBandwidthChunks;
  const size_t chunk = rt.layout().chunk_bytes();
  std::mt19937_64 rng(1);
  const auto tokens = kvplan::test::random_tokens(rng, n * 256);
  const auto keys = rt.keys(tokens);
  std::vector<std::byte> bytes(chunk);
  RoundTrip r;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    reference_copy();
    r.reference_s = std::min(r.reference_s, seconds_since(t0));

    std::vector<kvplan::DeviceChunk> held;
    for (size_t i = 0; i < n; ++i) {
      held.push_back(rt.acquire_device(keys[i]));
      kvplan::test::fill_pattern(bytes.data(), chunk, keys[i]);
      rt.write_device(held.back(), 0, bytes);
    }
    t0 = Clock::now();
    std::vector<std::shared_future<kvplan::TransferStatus>> stored;
    for (const auto& c : held) stored.push_back(rt.store(c));
    for (auto& f : stored) f.wait();
    r.store_s = std::min(r.store_s, seconds_since(t0));
    for (const auto& c : held) rt.release(c);
    for (uint64_t k : keys) (void)rt.evict_from(k, kvplan::Tier::kDevice);

    t0 = Clock::now();
    const kvplan::LoadResult loaded = rt.load(tokens).get();
    r.load_s = std::min(r.load_s, seconds_since(t0));
    if (loaded.chunks.size() != n) std::printf("load returned %zu chunks\n", loaded.chunks.size());
    for (const auto& c : loaded.chunks) {
      rt.read_device(c, 0, bytes);
      r.mismatches += kvplan::test::count_pattern_mismatches(bytes.data(), chunk, c.key);
      rt.release(c);
    }
    for (uint64_t k : keys) (void)rt.evict(k);
  }
  return r;
}

void print_round_trip(const RoundTrip& r, size_t bytes_each_way, const char* reference) {
  const double bytes = static_cast<double>(bytes_each_way);
  const double reference_gbs = 2 * bytes / r.reference_s / 1e9;
  const double rt_gbs = 2 * bytes / (r.store_s + r.load_s) / 1e9;
  std::printf("  %-31s %7.2f GB/s\n", reference, reference_gbs);
  std::printf("  store (device->host)             %7.2f GB/s\n", bytes / r.store_s / 1e9);
  std::printf("  load  (host->device)             %7.2f GB/s\n", bytes / r.load_s / 1e9);
  std::printf("  store+load                      %7.2f GB/s = %.2fx reference\n", rt_gbs,
              rt_gbs / reference_gbs);
  std::printf("  byte mismatches %llu\n", static_cast<unsigned long long>(r.mismatches));
}

// Device pool -> pinned host tier -> device pool on the host stand-in: the host tier's own cost,
// against memcpy of the same bytes both ways.
// hash_threads 0: the transfer thread hashes each piece as it copies it; more: a ChecksumPool
// hashes the source while the transfer thread copies it.
void bench_bandwidth(bool verify_host_payloads, int hash_threads) {
  const kvplan::PlanLayout layout(bandwidth_plan(), {.chunk_tokens = 256});
  kvplan::RuntimeOptions o = bandwidth_options(layout, kvplan::make_host_standin_backend());
  o.verify_host_payloads = verify_host_payloads;
  o.hash_threads = hash_threads;
  kvplan::OffloadRuntime rt(bandwidth_plan(), o);
  const size_t total = kBandwidthChunks * layout.chunk_bytes();
  std::byte* pinned = kvplan::allocate_locked_pages(total);
  std::vector<std::byte> device_ref(total);
  kvplan::test::fill_pattern(device_ref.data(), device_ref.size(), 7);
  const RoundTrip r = time_round_trips(rt, [&] {
    std::memcpy(pinned, device_ref.data(), total);
    std::memcpy(device_ref.data(), pinned, total);
  });
  kvplan::free_locked_pages(pinned, total);
  const kvplan::RuntimeStats s = rt.stats();
  const std::string checksums = !verify_host_payloads ? "off (headers checked)"
                                : hash_threads == 0
                                    ? "computed and verified while copying"
                                    : "computed and verified by " + std::to_string(hash_threads) +
                                          " hashing thread(s) next to the copy";
  std::printf("host tier: %zu chunks x %zu B (%zu transfer groups), payload checksums %s\n",
              kBandwidthChunks, layout.chunk_bytes(), layout.groups().size(), checksums.c_str());
  print_round_trip(r, total, "memcpy (same bytes, both ways)");
  std::printf("  fit d2h: t0 %.2f us, beta %.2f GB/s; h2d: t0 %.2f us, beta %.2f GB/s\n",
              s.device_to_host.t0_seconds * 1e6, s.device_to_host.bytes_per_second / 1e9,
              s.host_to_device.t0_seconds * 1e6, s.host_to_device.bytes_per_second / 1e9);
  std::printf("  guard violations %llu\n",
              static_cast<unsigned long long>(rt.count_guard_violations()));
}

// With a GPU: the runtime's store and load against plain pinned hipMemcpyAsync of the same bytes
// between the same kinds of memory, in the same run (target >= 0.9x). Checksums are computed on
// the pinned host side.
void bench_gpu_transfers() {
  int devices = 0;
  if (!kvplan::gpu::compiled_in() || !kvplan::gpu::device_count(&devices).ok() || devices == 0) {
    std::printf("device tier: no GPU (%s) — device<->host not measured\n",
                kvplan::gpu::backend_name());
    return;
  }
  const kvplan::PlanLayout layout(bandwidth_plan(), {.chunk_tokens = 256});
  const kvplan::RuntimeOptions o = bandwidth_options(layout, kvplan::make_gpu_device_backend(0));
  kvplan::OffloadRuntime rt(bandwidth_plan(), o);
  const size_t total = kBandwidthChunks * layout.chunk_bytes();
  std::byte* pinned = o.backend->allocate_pinned(total);
  std::byte* device = o.backend->allocate_device(total);
  const RoundTrip r = time_round_trips(rt, [&] {
    o.backend->copy_device_to_host(pinned, device, total);
    o.backend->copy_host_to_device(device, pinned, total);
  });
  o.backend->free_device(device, total);
  o.backend->free_pinned(pinned, total);
  std::printf(
      "device tier (%s): %zu chunks x %zu B, payload checksums verified (%u hashing threads)\n",
      std::string(rt.backend().name()).c_str(), kBandwidthChunks, layout.chunk_bytes(),
      o.backend->preferred_checksum_threads());
  print_round_trip(r, total, "pinned hipMemcpy (both ways)");
}

// 1M chunks of 256 tokens cached on the host tier (a 1-layer, 1-head slot:1 plan keeps the pinned
// memory small: the index is what lookups exercise), then lookups of whole sequences and of
// single-chunk prefixes.
void bench_lookup(size_t total_chunks) {
  const kvplan::Plan plan = [] {
    kvplan::Plan p = bench_plan(1, 1, 32, "slot:1", "slot:1");
    return p;
  }();
  const size_t per_seq = 1000;
  const size_t n_seq = (total_chunks + per_seq - 1) / per_seq;
  kvplan::RuntimeOptions o;
  o.chunk_tokens = 256;
  const kvplan::PlanLayout layout(plan, {.chunk_tokens = 256});
  o.device_capacity_bytes = 1024 * layout.chunk_bytes();
  o.host_capacity_bytes = (n_seq * per_seq) * kvplan::stored_chunk_bytes(layout);
  kvplan::OffloadRuntime rt(plan, o);
  auto sequence = [&](size_t s) {
    std::mt19937_64 rng(100 + s);
    return kvplan::test::random_tokens(rng, per_seq * 256);
  };
  auto t0 = Clock::now();
  for (size_t s = 0; s < n_seq; ++s) {
    const auto keys = rt.keys(sequence(s));
    for (uint64_t k : keys) {
      std::optional<kvplan::DeviceChunk> c = rt.try_acquire_device(k);
      if (!c) {  // every device slot waits for its store: let the worker catch up
        rt.flush();
        c = rt.acquire_device(k);
      }
      (void)rt.store(*c);
      rt.release(*c);
    }
  }
  rt.flush();
  const double fill_s = seconds_since(t0);
  const kvplan::RuntimeStats filled = rt.stats();

  std::vector<std::vector<uint32_t>> queries;
  for (size_t q = 0; q < 16; ++q) queries.push_back(sequence(q * 7 % n_seq));
  size_t hits = 0;
  const int full_reps = 200;
  t0 = Clock::now();
  for (int r = 0; r < full_reps; ++r) hits += rt.lookup(queries[r % queries.size()]).prefix_chunks;
  const double full_s = seconds_since(t0);
  const int short_reps = 1000000;
  t0 = Clock::now();
  for (int r = 0; r < short_reps; ++r) {
    const auto& q = queries[r % queries.size()];
    hits += rt.lookup(std::span<const uint32_t>(q).subspan(0, 256)).prefix_chunks;
  }
  const double short_s = seconds_since(t0);
  std::printf("lookup: %llu chunks cached (filled in %.1f s)\n",
              static_cast<unsigned long long>(filled.stores_ok), fill_s);
  std::printf("  1-chunk lookups        %10.0f /s\n", short_reps / short_s);
  std::printf("  1000-chunk lookups     %10.0f /s  (%.0f chunks/s)\n", full_reps / full_s,
              full_reps * 1000.0 / full_s);
  std::printf("  (hit chunks %zu)\n", hits);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t lookup_chunks = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  try {
    bench_bandwidth(true, 0);
    bench_bandwidth(true, static_cast<int>(std::max(1u, std::thread::hardware_concurrency() - 1)));
    bench_bandwidth(false, 0);
    bench_gpu_transfers();
    bench_lookup(lookup_chunks);
  } catch (const kvplan::Error& e) {
    std::fprintf(stderr, "kvplan_bench_runtime: %s\n", e.what());
    return 1;
  }
  return 0;
}
