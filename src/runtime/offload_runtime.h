// OffloadRuntime: caches packed KV chunks of a precision plan across a device pool, a pinned host
// tier and an optional disk tier, keyed by chained hashes of token chunks (C++ API; the C API in
// include/kvplan/kvplan_runtime.h wraps it).
//
//   kvplan::OffloadRuntime rt(kvplan::read_plan("plan.json"), {.chunk_tokens = 256});
//   auto keys = rt.keys(tokens);
//   kvplan::DeviceChunk c = rt.acquire_device(keys[0]);  // write the chunk's pages into c.data
//   auto stored = rt.store(c);                             // device -> host, asynchronous
//   rt.release(c);
//   kvplan::LookupResult hit = rt.lookup(tokens);          // longest cached prefix, where it lives
//   auto loaded = rt.load(tokens).get();                   // host/disk -> device, asynchronous
//   for (auto& d : loaded.chunks) rt.release(d);
//
// Threads: every method may be called from any thread. Stores run on one transfer worker, loads on
// another; each waits on nothing but its own copies. One mutex guards the index; copies run
// outside it, with the slots they touch marked in use so eviction cannot take them.
// Eviction is LRU per tier and never takes a pinned chunk or one in use (a device chunk a caller
// holds, a host slot being read or written, a disk file being read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "plan/plan.h"
#include "runtime/chunk_key.h"
#include "runtime/device_backend.h"
#include "runtime/disk_tier.h"
#include "runtime/plan_layout.h"
#include "runtime/stored_object.h"
#include "runtime/transfer_stats.h"

namespace kvplan {

enum class Tier : uint8_t { kMiss = 0, kDevice = 1, kHost = 2, kDisk = 3 };
std::string_view tier_name(Tier tier);

struct RuntimeOptions {
  size_t chunk_tokens = 256;                      // a multiple of the plan's block_size
  uint64_t device_capacity_bytes = 256ull << 20;  // device pool; at least one chunk
  uint64_t host_capacity_bytes = 1ull << 30;      // pinned host tier; at least one chunk
  // Empty: no disk tier. Chunks go to a subdirectory per plan and model (disk_tier.h), which one
  // runtime at a time may use: a second one on the same plan, model and disk_dir is refused.
  std::filesystem::path disk_dir;
  uint64_t disk_capacity_bytes = 16ull << 30;  // of this plan's subdirectory
  bool disk_fsync = true;
  DiskIoHook disk_io_hook;  // tests: inject disk write failures (disk_tier.h); empty: none
  // Checksum every payload as it enters the host tier and verify it on every host -> device load
  // (default). Off: host-tier payloads are copied without hashing (the tier is this process's own
  // pinned memory; headers are still checked) and the checksum is computed when a chunk spills to
  // disk — disk objects are always verified. Off roughly doubles host-tier bandwidth on machines
  // whose hash rate is close to their memcpy rate.
  bool verify_host_payloads = true;
  // Threads that hash payloads next to the transfer workers (ChecksumPool): -1 = the backend's
  // choice (none on the host stand-in, which hashes while it copies; about half the cores next to
  // a GPU, whose DMA outruns one hashing core); 0 = the transfer worker hashes alone.
  int hash_threads = -1;
  // Hex fingerprint of the model being served; empty = the plan's. When both are non-empty they
  // must be equal.
  std::string model_fingerprint;
  // When set, the plan is checked against this geometry (check_plan_matches).
  std::optional<KvGeometry> model_geometry;
  std::shared_ptr<DeviceBackend> backend;  // null: make_default_device_backend()
};

// A device-pool slot a caller holds: `data` is device memory of layout().chunk_bytes() bytes laid
// out as PlanLayout describes. Must be handed back with release().
struct DeviceChunk {
  uint64_t key = 0;
  int32_t slot = -1;
  std::byte* data = nullptr;
  size_t bytes = 0;
  [[nodiscard]] bool valid() const { return slot >= 0; }
};

struct LookupResult {
  std::vector<uint64_t> keys;   // one per whole chunk of the tokens
  std::vector<Tier> locations;  // per chunk; kMiss from the first chunk not cached on
  size_t prefix_chunks = 0;
  size_t prefix_tokens = 0;
};

struct TransferStatus {
  ErrorCode code = ErrorCode::kInternal;
  bool ok = true;
  std::string message;
  RefusalReason refusal = RefusalReason::kNone;
};

struct LoadResult {
  TransferStatus status;            // !ok when a chunk was refused or no device slot was free
  std::vector<DeviceChunk> chunks;  // the loaded prefix, in order; release() each
};

class OffloadRuntime {
 public:
  // Validates the plan (and the model geometry/fingerprint when given), builds the layout and
  // allocates the device pool and pinned host tier. Throws Error: kInvalidArgument for a plan
  // or options that do not fit, kResourceExhausted when memory cannot be allocated or pinned.
  OffloadRuntime(const Plan& plan, RuntimeOptions options);
  ~OffloadRuntime();
  OffloadRuntime(const OffloadRuntime&) = delete;
  OffloadRuntime& operator=(const OffloadRuntime&) = delete;

  [[nodiscard]] const PlanLayout& layout() const { return layout_; }
  [[nodiscard]] const ObjectIdentity& identity() const { return identity_; }
  [[nodiscard]] DeviceBackend& backend() const { return *backend_; }
  [[nodiscard]] size_t device_slots() const { return device_slots_; }
  [[nodiscard]] size_t host_slots() const { return host_slots_; }
  [[nodiscard]] std::vector<uint64_t> keys(std::span<const uint32_t> tokens) const;

  // A device slot to produce `key`'s chunk into (evicting the least recently used free chunk).
  // nullopt when the chunk is already on the device or every slot is in use or pinned.
  std::optional<DeviceChunk> try_acquire_device(uint64_t key);
  DeviceChunk acquire_device(uint64_t key);  // Error(kResourceExhausted / kInvalidArgument)
  void release(const DeviceChunk& chunk);
  // Host <-> device copies for callers without a GPU API of their own (tests, Python).
  void write_device(const DeviceChunk& chunk, size_t offset, std::span<const std::byte> bytes);
  void read_device(const DeviceChunk& chunk, size_t offset, std::span<std::byte> bytes) const;

  // On the store worker, once `fence` has completed: publishes the chunk on the device tier, then
  // copies it to the host tier. Until the fence completes the chunk is visible nowhere (the
  // producer may still be writing it). The host copy becomes visible to lookups only once complete
  // and checksummed; a failed store (no evictable host slot, a failed copy) is never visible, and
  // after a failed fence the device copy is not published either.
  std::shared_future<TransferStatus> store(const DeviceChunk& chunk, DeviceFence fence = {});
  [[nodiscard]] LookupResult lookup(std::span<const uint32_t> tokens);
  // Brings the longest cached prefix (at most max_chunks) onto the device on the load worker.
  // Every object read from host or disk is checked (header fields and payload checksum) first;
  // a refused object is counted, dropped from its tier and ends the prefix.
  std::shared_future<LoadResult> load(std::span<const uint32_t> tokens,
                                      size_t max_chunks = SIZE_MAX);

  bool pin(uint64_t key);  // false if no tier holds the chunk
  bool unpin(uint64_t key);
  // Drops the chunk from every tier where it is neither pinned nor in use; true if it is gone.
  bool evict(uint64_t key);
  // Drops only the copy on `tier` (kDevice, kHost or kDisk); true if that tier no longer holds it.
  bool evict_from(uint64_t key, Tier tier);
  // Waits until every queued store and load has finished.
  void flush();

  [[nodiscard]] RuntimeStats stats() const;
  // Guard bytes between device and host slots that changed (must stay 0).
  [[nodiscard]] uint64_t count_guard_violations() const;

  // Test hooks: the host tier's stored bytes of a chunk (headers included), and a disk file path.
  [[nodiscard]] std::span<std::byte> host_object_bytes_for_testing(uint64_t key);
  [[nodiscard]] std::optional<std::filesystem::path> disk_path_for_testing(uint64_t key) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  PlanLayout layout_;
  ObjectIdentity identity_;
  std::shared_ptr<DeviceBackend> backend_;
  size_t device_slots_ = 0;
  size_t host_slots_ = 0;
};

// The model fingerprint a runtime uses: hash of the plan's model fingerprint text (or of the
// override), architecture and KV geometry.
uint64_t runtime_model_fingerprint(const Plan& plan, const std::string& model_fingerprint);

}  // namespace kvplan
