// Internal to the runtime: the state behind OffloadRuntime (its slot pools, chunk index and
// transfer workers), shared by the sources that implement it. Nothing outside src/runtime includes
// this header; callers use offload_runtime.h.
//
// Where each part lives:
//   offload_runtime.cpp    the public OffloadRuntime API: construction (pools, guards, disk scan)
//                          and the caller-facing methods
//   chunk_index.cpp        entries, LRU lists, slot allocation, eviction and spill to disk
//   store_path.cpp         device -> host stores (run_store) on the store worker
//   load_path.cpp          host/disk -> device loads (run_load) on the load worker
//   transfer_failure.cpp   how a failed transfer is counted, logged and reported
//
// Locking: `mu` guards the index, LRU lists, free lists, disk file count and counters; methods
// named *_locked expect it held. Copies run outside it, with the slots they touch marked in use
// (ChunkEntry's users/readers/busy fields) so eviction cannot take them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "runtime/checksum_pool.h"
#include "runtime/disk_tier.h"
#include "runtime/offload_runtime.h"
#include "runtime/transfer_worker.h"

namespace kvplan {

// Bytes of a known pattern around every device and host slot: a copy that strays past its slot
// changes them and count_guard_violations() reports it.
inline constexpr size_t kGuardBytes = 64;
inline constexpr std::byte kGuardByte{0xA5};

// kWriting: a producer (the caller, or a load) is filling the slot. kPublishing: stored, but the
// producer's stream may still be writing it, so nobody reads it until the store worker has seen
// the producer's fence. kReady: complete; lookups report it and loads hand it out.
enum class DeviceState : uint8_t { kNone, kWriting, kPublishing, kReady };
enum class HostState : uint8_t { kNone, kWriting, kReady, kEvicting };

// Where one chunk lives on each tier, and who is using it there.
struct ChunkEntry {
  int32_t device_slot = -1;
  DeviceState device = DeviceState::kNone;
  uint32_t device_users = 0;  // caller handles + stores reading the slot
  int32_t host_slot = -1;
  HostState host = HostState::kNone;
  uint32_t host_readers = 0;
  bool on_disk = false;
  bool disk_busy = false;  // being written
  uint32_t disk_readers = 0;
  uint32_t pins = 0;
  std::list<uint64_t>::iterator device_lru, host_lru, disk_lru;
  bool in_device_lru = false, in_host_lru = false, in_disk_lru = false;
};

struct OffloadRuntime::Impl {
  OffloadRuntime& rt;
  RuntimeOptions options;
  std::shared_ptr<DeviceBackend> backend;

  size_t chunk_bytes = 0;                    // device image
  size_t stored_bytes = 0;                   // headers + payloads
  std::vector<size_t> record_offsets;        // per group, in a stored chunk
  std::vector<StoredObjectHeader> expected;  // per group; chunk_key filled per object

  std::byte* device_base = nullptr;
  size_t device_stride = 0, device_region = 0;
  std::byte* host_base = nullptr;
  size_t host_stride = 0, host_region = 0;

  std::optional<DiskTier> disk;
  size_t disk_max_files = 0;
  size_t disk_files = 0;  // including reservations for writes in flight

  std::mutex mu;  // everything below up to the fits
  std::unordered_map<uint64_t, ChunkEntry> index;
  std::list<uint64_t> device_lru, host_lru, disk_lru;  // front = most recently used
  std::vector<int32_t> free_device, free_host;
  RuntimeStats counters;

  mutable std::mutex fit_mu;
  LinearTransferFit fit_d2h, fit_h2d, fit_disk_write, fit_disk_read;

  std::unique_ptr<ChecksumPool> hash_pool;  // outlives the workers that use it

  // Declared last: stopped in ~Impl before the memory they copy is freed.
  TransferWorker store_worker;
  TransferWorker load_worker;

  Impl(OffloadRuntime& owner, RuntimeOptions opts) : rt(owner), options(std::move(opts)) {}
  ~Impl();

  std::byte* device_ptr(int32_t slot) const {
    return device_base + kGuardBytes + static_cast<size_t>(slot) * device_stride;
  }
  std::byte* host_ptr(int32_t slot) const {
    return host_base + kGuardBytes + static_cast<size_t>(slot) * host_stride;
  }

  // --- The chunk index (chunk_index.cpp; the two LRU helpers here); mu held unless said ---
  static void touch(std::list<uint64_t>& lru, std::list<uint64_t>::iterator& it, bool& in,
                    uint64_t key) {
    if (in) lru.erase(it);
    lru.push_front(key);
    it = lru.begin();
    in = true;
  }
  static void unlink_lru(std::list<uint64_t>& lru, std::list<uint64_t>::iterator& it, bool& in) {
    if (in) lru.erase(it);
    in = false;
  }
  // Forgets `key` once no tier holds it and nobody uses it.
  void erase_if_empty(uint64_t key);
  void drop_device_locked(ChunkEntry& e);
  void drop_host_locked(uint64_t key, ChunkEntry& e);
  void drop_disk_locked(uint64_t key, ChunkEntry& e);
  // A free device slot, evicting the least recently used idle chunk; -1 when none is idle.
  int32_t allocate_device_slot_locked();
  // Makes room for one more disk file (mu held); false if every file is pinned or being read.
  bool reserve_disk_file_locked();
  // A host slot for a store (store worker only; `lock` holds mu and is released while a victim
  // spills). Evicts the least recently used idle chunk, spilling it to disk when there is a disk
  // tier. -1 when nothing can be evicted. Every eviction is counted as landed (the chunk is on
  // disk afterwards) or dropped (it is gone).
  int32_t allocate_host_slot(std::unique_lock<std::mutex>& lock);
  // Drops one store's or caller's hold on a device slot (mu held); a chunk that was produced but
  // never published (kWriting) leaves the device with its last holder.
  void release_device_user_locked(uint64_t key, ChunkEntry& e);

  // --- The store path (store_path.cpp; store worker) ---
  // Computes the payload checksums a stored chunk was written without (verify_host_payloads off).
  void seal_payload_checksums(std::byte* stored) const;
  // Publishes the chunk on the device once the producer's fence completes, then (copy_to_host)
  // copies it into a host slot.
  TransferStatus run_store(uint64_t key, int32_t device_slot, DeviceFence fence, bool copy_to_host);

  // --- The load path (load_path.cpp; load worker) ---
  // Checks a stored chunk's records and copies their payloads into a device slot.
  RefusalReason copy_in(uint64_t key, const std::byte* src, size_t n, std::byte* device,
                        bool verify_payload);
  LoadResult run_load(const std::vector<uint64_t>& keys);

  // --- Failures (transfer_failure.cpp) ---
  // A backend failure in a transfer: counted and logged (at doubling intervals), and returned as
  // the operation's status; the runtime goes on.
  TransferStatus transfer_failure_locked(std::string_view what, uint64_t key, const Error& err);
  // Last resort for an exception a transfer did not handle itself (its catches cover backend and
  // disk errors, so this is std::bad_alloc or a bug): the operation fails with it, counted,
  // instead of leaving its caller's future without a value. Takes mu.
  TransferStatus unexpected_failure(std::string_view what, const std::exception& err);

  static TransferStatus status_ok() {
    return {ErrorCode::kInternal, true, {}, RefusalReason::kNone};
  }
  static TransferStatus status_error(ErrorCode code, std::string message,
                                     RefusalReason refusal = RefusalReason::kNone) {
    return {code, false, std::move(message), refusal};
  }
  // A backend or disk failure as the runtime's error: GPU backends throw Error from check();
  // anything else (std::bad_alloc, a foreign backend's exception) is internal.
  static Error as_error(const std::exception& err) {
    if (const auto* e = dynamic_cast<const Error*>(&err)) return *e;
    return Error(ErrorCode::kInternal, err.what());
  }
  // True for 1, 2, 4, 8, ...: repeated failures (a full disk fails every spill) are logged with
  // their count at doubling intervals instead of once per chunk.
  static bool worth_logging(uint64_t nth) { return (nth & (nth - 1)) == 0; }
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

}  // namespace kvplan
