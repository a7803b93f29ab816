#include "runtime/offload_runtime.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <list>
#include <mutex>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "core/hash.h"
#include "plan/plan_fingerprint.h"
#include "runtime/checksum_pool.h"
#include "runtime/disk_tier.h"
#include "runtime/transfer_worker.h"

namespace kvplan {
namespace {

// Bytes of a known pattern around every device and host slot: a copy that strays past its slot
// changes them and count_guard_violations() reports it.
constexpr size_t kGuardBytes = 64;
constexpr std::byte kGuardByte{0xA5};

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// kWriting: a producer (the caller, or a load) is filling the slot. kPublishing: stored, but the
// producer's stream may still be writing it, so nobody reads it until the store worker has seen
// the producer's fence. kReady: complete; lookups report it and loads hand it out.
enum class DeviceState : uint8_t { kNone, kWriting, kPublishing, kReady };
enum class HostState : uint8_t { kNone, kWriting, kReady, kEvicting };

struct Entry {
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

TransferStatus status_ok() {
  return {ErrorCode::kInternal, true, {}, RefusalReason::kNone};
}

TransferStatus status_error(ErrorCode code, std::string message,
                            RefusalReason refusal = RefusalReason::kNone) {
  return {code, false, std::move(message), refusal};
}

// A backend or disk failure as the runtime's error: GPU backends throw Error from check(); anything
// else (std::bad_alloc, a foreign backend's exception) is internal.
Error as_error(const std::exception& err) {
  if (const auto* e = dynamic_cast<const Error*>(&err)) return *e;
  return Error(ErrorCode::kInternal, err.what());
}

// True for 1, 2, 4, 8, ...: repeated failures (a full disk fails every spill) are logged with
// their count at doubling intervals instead of once per chunk.
bool worth_logging(uint64_t nth) {
  return (nth & (nth - 1)) == 0;
}

}  // namespace

std::string_view tier_name(Tier tier) {
  switch (tier) {
    case Tier::kDevice:
      return "device";
    case Tier::kHost:
      return "host";
    case Tier::kDisk:
      return "disk";
    case Tier::kMiss:
      break;
  }
  return "miss";
}

uint64_t runtime_model_fingerprint(const Plan& plan, const std::string& model_fingerprint) {
  const std::string& fp = model_fingerprint.empty() ? plan.model.fingerprint : model_fingerprint;
  if (!model_fingerprint.empty() && !plan.model.fingerprint.empty() &&
      model_fingerprint != plan.model.fingerprint) {
    fail(ErrorCode::kInvalidArgument,
         "plan for '{}' was made for model fingerprint {}, but the served model's is {}",
         plan.model.name, plan.model.fingerprint, model_fingerprint);
  }
  Hasher h;
  h.update("kvplan.model");
  h.update(fp);
  h.update(plan.model.architecture);
  for (const KvLayerGeometry& lg : plan.model.geometry.layers) {
    h.update_u64(static_cast<uint64_t>(lg.n_kv_heads));
    h.update_u64(static_cast<uint64_t>(lg.head_dim));
  }
  return h.digest();
}

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
  std::unordered_map<uint64_t, Entry> index;
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
  ~Impl() {
    store_worker.stop();
    load_worker.stop();
    if (device_base != nullptr) backend->free_device(device_base, device_region);
    if (host_base != nullptr) backend->free_pinned(host_base, host_region);
  }

  std::byte* device_ptr(int32_t slot) const {
    return device_base + kGuardBytes + static_cast<size_t>(slot) * device_stride;
  }
  std::byte* host_ptr(int32_t slot) const {
    return host_base + kGuardBytes + static_cast<size_t>(slot) * host_stride;
  }

  // --- LRU helpers (mu held) ---
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

  void erase_if_empty(uint64_t key) {
    auto it = index.find(key);
    if (it == index.end()) return;
    const Entry& e = it->second;
    if (e.device == DeviceState::kNone && e.host == HostState::kNone && !e.on_disk &&
        !e.disk_busy && e.device_users == 0 && e.host_readers == 0 && e.disk_readers == 0) {
      index.erase(it);
    }
  }

  void drop_device_locked(Entry& e) {
    unlink_lru(device_lru, e.device_lru, e.in_device_lru);
    free_device.push_back(e.device_slot);
    e.device_slot = -1;
    e.device = DeviceState::kNone;
  }

  void drop_host_locked(uint64_t key, Entry& e) {
    (void)key;
    unlink_lru(host_lru, e.host_lru, e.in_host_lru);
    free_host.push_back(e.host_slot);
    e.host_slot = -1;
    e.host = HostState::kNone;
  }

  void drop_disk_locked(uint64_t key, Entry& e) {
    unlink_lru(disk_lru, e.disk_lru, e.in_disk_lru);
    disk->remove(key);
    e.on_disk = false;
    --disk_files;
  }

  int32_t allocate_device_slot_locked() {
    if (!free_device.empty()) {
      const int32_t slot = free_device.back();
      free_device.pop_back();
      return slot;
    }
    for (auto it = device_lru.rbegin(); it != device_lru.rend(); ++it) {
      const uint64_t key = *it;
      Entry& v = index.at(key);
      if (v.device == DeviceState::kReady && v.device_users == 0 && v.pins == 0) {
        drop_device_locked(v);
        ++counters.evictions_device;
        erase_if_empty(key);
        const int32_t slot = free_device.back();
        free_device.pop_back();
        return slot;
      }
    }
    return -1;
  }

  // Makes room for one more disk file (mu held); false if every file is pinned or being read.
  bool reserve_disk_file_locked() {
    while (disk_files >= disk_max_files) {
      bool evicted = false;
      for (auto it = disk_lru.rbegin(); it != disk_lru.rend(); ++it) {
        const uint64_t key = *it;
        Entry& v = index.at(key);
        if (v.disk_readers == 0 && v.pins == 0 && !v.disk_busy) {
          drop_disk_locked(key, v);
          ++counters.evictions_disk;
          erase_if_empty(key);
          evicted = true;
          break;
        }
      }
      if (!evicted) return false;
    }
    ++disk_files;
    return true;
  }

  // Computes the payload checksums a stored chunk was written without (verify_host_payloads off).
  void seal_payload_checksums(std::byte* stored) const {
    for (const TransferGroup& g : rt.layout().groups()) {
      std::byte* rec = stored + record_offsets[g.index];
      StoredObjectHeader h;
      std::memcpy(&h, rec, sizeof h);
      h.payload_checksum = hash_pool->checksum(rec + sizeof h, g.chunk_bytes);
      seal_object_header(h);
      std::memcpy(rec, &h, sizeof h);
    }
  }

  // A host slot for a store (store worker only). Evicts the least recently used idle chunk,
  // spilling it to disk when there is a disk tier. -1 when nothing can be evicted. Every eviction
  // is counted as landed (the chunk is on disk afterwards) or dropped (it is gone).
  int32_t allocate_host_slot(std::unique_lock<std::mutex>& lock) {
    for (;;) {
      if (!free_host.empty()) {
        const int32_t slot = free_host.back();
        free_host.pop_back();
        return slot;
      }
      uint64_t victim_key = 0;
      Entry* victim = nullptr;
      for (auto it = host_lru.rbegin(); it != host_lru.rend(); ++it) {
        Entry& v = index.at(*it);
        if (v.host == HostState::kReady && v.host_readers == 0 && v.pins == 0) {
          victim_key = *it;
          victim = &v;
          break;
        }
      }
      if (victim == nullptr) return -1;
      unlink_lru(host_lru, victim->host_lru, victim->in_host_lru);
      victim->host = HostState::kEvicting;
      ++counters.evictions_host;
      bool landed = victim->on_disk;
      if (disk && !victim->on_disk && reserve_disk_file_locked()) {
        victim->disk_busy = true;
        std::byte* bytes = host_ptr(victim->host_slot);
        lock.unlock();
        std::optional<Error> write_error;
        const auto t0 = std::chrono::steady_clock::now();
        try {
          if (!options.verify_host_payloads) seal_payload_checksums(bytes);
          disk->write(victim_key, {bytes, stored_bytes});
        } catch (const std::exception& err) {
          write_error = as_error(err);  // the chunk is dropped: a later lookup recomputes it
        }
        const double dt = seconds_since(t0);
        if (!write_error) {
          std::lock_guard<std::mutex> fit_lock(fit_mu);
          fit_disk_write.add(static_cast<double>(stored_bytes), dt);
        }
        lock.lock();
        victim->disk_busy = false;
        if (!write_error) {
          victim->on_disk = true;
          landed = true;
          touch(disk_lru, victim->disk_lru, victim->in_disk_lru, victim_key);
          counters.bytes_to_disk += stored_bytes;
        } else {
          --disk_files;
          const uint64_t n = ++counters.spill_write_failures;
          if (worth_logging(n)) {
            spdlog::warn(
                "disk tier: chunk {} dropped, its spill failed ({} failed spills so far): {}",
                hash_hex(victim_key), n, write_error->what());
          }
        }
      }
      ++(landed ? counters.spills_landed : counters.spills_dropped);
      free_host.push_back(victim->host_slot);
      victim->host_slot = -1;
      victim->host = HostState::kNone;
      erase_if_empty(victim_key);
    }
  }

  // Drops one store's or caller's hold on a device slot (mu held); a chunk that was produced but
  // never published (kWriting) leaves the device with its last holder.
  void release_device_user_locked(uint64_t key, Entry& e) {
    if (--e.device_users == 0 && e.device == DeviceState::kWriting) {
      drop_device_locked(e);
      erase_if_empty(key);
    }
  }

  // A backend failure in a transfer: counted and logged (at doubling intervals), and returned as
  // the operation's status; the runtime goes on.
  TransferStatus transfer_failure_locked(std::string_view what, uint64_t key, const Error& err) {
    const uint64_t n = ++counters.transfer_errors;
    if (worth_logging(n)) {
      spdlog::warn("{} of chunk {} failed ({} transfer errors so far): {}", what, hash_hex(key), n,
                   err.what());
    }
    return status_error(err.code(),
                        fmt::format("{} of chunk {}: {}", what, hash_hex(key), err.what()));
  }

  // Publishes the chunk on the device once the producer's fence completes, then (copy_to_host)
  // copies it into a host slot.
  TransferStatus run_store(uint64_t key, int32_t device_slot, DeviceFence fence,
                           bool copy_to_host) {
    try {
      backend->wait_fence(fence);
    } catch (const std::exception& err) {
      // The producer's writes may not have landed: the chunk is never published, and leaves the
      // device with its last holder.
      std::lock_guard<std::mutex> lock(mu);
      Entry& e = index.at(key);
      if (copy_to_host) e.host = HostState::kNone;
      if (e.device == DeviceState::kPublishing) e.device = DeviceState::kWriting;
      ++counters.stores_failed;
      TransferStatus status = transfer_failure_locked("store fence", key, as_error(err));
      release_device_user_locked(key, e);
      return status;
    }
    std::unique_lock<std::mutex> lock(mu);
    Entry& e = index.at(key);
    if (e.device == DeviceState::kPublishing) {
      e.device = DeviceState::kReady;
      touch(device_lru, e.device_lru, e.in_device_lru, key);
    }
    if (!copy_to_host) {  // deduplicated: the host or disk tier already holds it
      release_device_user_locked(key, e);
      return status_ok();
    }
    const int32_t slot = allocate_host_slot(lock);
    if (slot < 0) {
      e.host = HostState::kNone;
      release_device_user_locked(key, e);
      ++counters.stores_failed;
      return status_error(
          ErrorCode::kResourceExhausted,
          fmt::format("host tier full: all {} slots are pinned or in use", rt.host_slots()));
    }
    lock.unlock();
    std::byte* dst = host_ptr(slot);
    const std::byte* src = device_ptr(device_slot);
    try {
      for (const TransferGroup& g : rt.layout().groups()) {
        const size_t rec = record_offsets[g.index];
        const auto t0 = std::chrono::steady_clock::now();
        std::byte* payload = dst + rec + sizeof(StoredObjectHeader);
        uint64_t sum = 0;  // filled in at spill time when host payloads are not verified
        if (options.verify_host_payloads) {
          sum = backend->copy_device_to_host_checksum(payload, src + g.chunk_offset, g.chunk_bytes,
                                                      *hash_pool);
        } else {
          backend->copy_device_to_host(payload, src + g.chunk_offset, g.chunk_bytes);
        }
        const double dt = seconds_since(t0);
        StoredObjectHeader h = expected[g.index];
        h.chunk_key = key;
        h.payload_checksum = sum;
        seal_object_header(h);
        std::memcpy(dst + rec, &h, sizeof h);
        std::lock_guard<std::mutex> fit_lock(fit_mu);
        fit_d2h.add(static_cast<double>(g.chunk_bytes), dt);
      }
    } catch (const std::exception& err) {
      // A half-copied host slot is never published: it goes back to the free list. The device
      // copy is untouched and stays.
      lock.lock();
      free_host.push_back(slot);
      e.host = HostState::kNone;
      ++counters.stores_failed;
      TransferStatus status = transfer_failure_locked("store", key, as_error(err));
      release_device_user_locked(key, e);
      return status;
    }
    lock.lock();
    e.host_slot = slot;
    e.host = HostState::kReady;
    touch(host_lru, e.host_lru, e.in_host_lru, key);
    release_device_user_locked(key, e);
    ++counters.stores_ok;
    counters.bytes_device_to_host += chunk_bytes;
    return status_ok();
  }

  // Last resort for an exception a transfer did not handle itself (its catches cover backend and
  // disk errors, so this is std::bad_alloc or a bug): the operation fails with it, counted,
  // instead of leaving its caller's future without a value.
  TransferStatus unexpected_failure(std::string_view what, const std::exception& err) {
    std::lock_guard<std::mutex> lock(mu);
    ++counters.transfer_errors;
    spdlog::error("{} failed unexpectedly: {}", what, err.what());
    return status_error(ErrorCode::kInternal, fmt::format("{} failed: {}", what, err.what()));
  }

  // Checks a stored chunk's records and copies their payloads into a device slot.
  RefusalReason copy_in(uint64_t key, const std::byte* src, size_t n, std::byte* device,
                        bool verify_payload) {
    const RefusalReason r = check_stored_chunk_headers({src, n}, expected, key);
    if (r != RefusalReason::kNone) return r;
    for (const TransferGroup& g : rt.layout().groups()) {
      const size_t rec = record_offsets[g.index];
      StoredObjectHeader seen;
      std::memcpy(&seen, src + rec, sizeof seen);
      const auto t0 = std::chrono::steady_clock::now();
      const std::byte* payload = src + rec + sizeof(StoredObjectHeader);
      if (verify_payload) {
        const uint64_t sum = backend->copy_host_to_device_checksum(device + g.chunk_offset, payload,
                                                                   g.chunk_bytes, *hash_pool);
        if (sum != seen.payload_checksum) return RefusalReason::kChecksum;
      } else {
        backend->copy_host_to_device(device + g.chunk_offset, payload, g.chunk_bytes);
      }
      const double dt = seconds_since(t0);
      std::lock_guard<std::mutex> fit_lock(fit_mu);
      fit_h2d.add(static_cast<double>(g.chunk_bytes), dt);
    }
    return RefusalReason::kNone;
  }

  LoadResult run_load(const std::vector<uint64_t>& keys) {
    LoadResult out;
    out.status = status_ok();
    for (const uint64_t key : keys) {
      std::unique_lock<std::mutex> lock(mu);
      auto it = index.find(key);
      if (it == index.end()) break;
      Entry& e = it->second;
      if (e.device == DeviceState::kReady) {
        ++e.device_users;
        touch(device_lru, e.device_lru, e.in_device_lru, key);
        out.chunks.push_back({key, e.device_slot, device_ptr(e.device_slot), chunk_bytes});
        ++counters.loads_chunks;
        continue;
      }
      if (e.device != DeviceState::kNone) break;  // being produced, published or loaded elsewhere
      const bool from_host = e.host == HostState::kReady;
      const bool from_disk = !from_host && e.on_disk && !e.disk_busy;
      if (!from_host && !from_disk) break;
      const int32_t slot = allocate_device_slot_locked();
      if (slot < 0) {
        out.status = status_error(
            ErrorCode::kResourceExhausted,
            fmt::format("device pool full: all {} slots are pinned or in use", rt.device_slots()));
        break;
      }
      e.device_slot = slot;
      e.device = DeviceState::kWriting;
      e.device_users = 1;
      const int32_t host_slot = e.host_slot;
      if (from_host) {
        ++e.host_readers;
      } else {
        ++e.disk_readers;
      }
      lock.unlock();

      RefusalReason refusal = RefusalReason::kNone;
      std::optional<Error> io_error;    // the disk file cannot be read: it leaves the tier
      std::optional<Error> copy_error;  // the backend failed the copy: the source copy stays
      if (from_host) {
        try {
          refusal = copy_in(key, host_ptr(host_slot), stored_bytes, device_ptr(slot),
                            options.verify_host_payloads);
        } catch (const std::exception& err) {
          copy_error = as_error(err);
        }
      } else {
        std::optional<std::vector<std::byte>> bytes;
        try {
          const auto t0 = std::chrono::steady_clock::now();
          bytes = disk->read(key, stored_bytes);
          const double dt = seconds_since(t0);
          if (!bytes) {
            io_error = Error(ErrorCode::kNotFound,
                             fmt::format("disk tier: {} vanished", disk->path_of(key).string()));
          } else {
            std::lock_guard<std::mutex> fit_lock(fit_mu);
            fit_disk_read.add(static_cast<double>(bytes->size()), dt);
          }
        } catch (const Error& err) {
          io_error = err;
        }
        if (bytes) {
          try {
            refusal = copy_in(key, bytes->data(), bytes->size(), device_ptr(slot), true);
          } catch (const std::exception& err) {
            copy_error = as_error(err);
          }
          std::lock_guard<std::mutex> counters_lock(mu);
          counters.bytes_from_disk += bytes->size();
        }
      }

      lock.lock();
      if (from_host) {
        --e.host_readers;
      } else {
        --e.disk_readers;
      }
      if (refusal == RefusalReason::kNone && !io_error && !copy_error) {
        e.device = DeviceState::kReady;
        touch(device_lru, e.device_lru, e.in_device_lru, key);
        if (from_host) touch(host_lru, e.host_lru, e.in_host_lru, key);
        if (from_disk) touch(disk_lru, e.disk_lru, e.in_disk_lru, key);
        counters.bytes_host_to_device += chunk_bytes;
        ++counters.loads_chunks;
        out.chunks.push_back({key, slot, device_ptr(slot), chunk_bytes});
        continue;
      }
      // Refused, unreadable or not copied: never handed out. A refused or unreadable copy leaves
      // its tier; after a failed copy the source is still good and stays.
      e.device_users = 0;
      drop_device_locked(e);
      if (!copy_error && from_host && e.host_readers == 0 && e.host == HostState::kReady) {
        drop_host_locked(key, e);
      }
      if (!copy_error && from_disk && e.on_disk && e.disk_readers == 0 && !e.disk_busy) {
        drop_disk_locked(key, e);
      }
      if (copy_error) {
        out.status = transfer_failure_locked("load", key, *copy_error);
      } else if (refusal != RefusalReason::kNone) {
        ++counters.refusals;
        ++counters.refusals_by_reason[static_cast<size_t>(refusal)];
        out.status = status_error(
            ErrorCode::kDataLoss,
            fmt::format("chunk {} from the {} tier refused: {} mismatch", hash_hex(key),
                        from_host ? "host" : "disk", refusal_reason_name(refusal)),
            refusal);
      } else {
        out.status = status_error(io_error->code(), io_error->what());
      }
      erase_if_empty(key);
      break;
    }
    return out;
  }
};

OffloadRuntime::OffloadRuntime(const Plan& plan, RuntimeOptions options)
    : layout_(plan, LayoutOptions{.chunk_tokens = options.chunk_tokens}) {
  plan.quantization.validate();
  if (options.model_geometry) check_plan_matches(plan, *options.model_geometry, "the served model");
  identity_.plan_fingerprint = plan_fingerprint(plan);
  identity_.model_fingerprint = runtime_model_fingerprint(plan, options.model_fingerprint);
  backend_ = options.backend ? options.backend : make_default_device_backend();
  impl_ = std::make_unique<Impl>(*this, std::move(options));
  Impl& im = *impl_;
  im.backend = backend_;
  const int hash_threads = im.options.hash_threads;
  if (hash_threads < -1 || hash_threads > 256) {
    fail(ErrorCode::kInvalidArgument,
         "hash_threads: {} (expected -1 for the backend's choice, or 0..256)", hash_threads);
  }
  im.hash_pool =
      std::make_unique<ChecksumPool>(hash_threads < 0 ? backend_->preferred_checksum_threads()
                                                      : static_cast<unsigned>(hash_threads));
  im.chunk_bytes = layout_.chunk_bytes();
  im.stored_bytes = stored_chunk_bytes(layout_);
  size_t offset = 0;
  for (const TransferGroup& g : layout_.groups()) {
    im.record_offsets.push_back(offset);
    offset += sizeof(StoredObjectHeader) + g.chunk_bytes;
    im.expected.push_back(make_object_header(identity_, layout_, g.index, 0, 0));
  }

  const RuntimeOptions& o = im.options;
  device_slots_ = o.device_capacity_bytes / im.chunk_bytes;
  host_slots_ = o.host_capacity_bytes / im.stored_bytes;
  if (device_slots_ == 0 || host_slots_ == 0 || device_slots_ > INT32_MAX ||
      host_slots_ > INT32_MAX) {
    fail(ErrorCode::kInvalidArgument,
         "capacities: device {} bytes and host {} bytes must each hold at least one chunk "
         "({} device bytes, {} stored bytes for {} tokens)",
         o.device_capacity_bytes, o.host_capacity_bytes, im.chunk_bytes, im.stored_bytes,
         layout_.chunk_tokens());
  }
  im.device_stride = round_up(im.chunk_bytes, 64) + kGuardBytes;
  im.device_region = kGuardBytes + device_slots_ * im.device_stride;
  im.host_stride = round_up(im.stored_bytes, 64) + kGuardBytes;
  im.host_region = kGuardBytes + host_slots_ * im.host_stride;
  im.device_base = backend_->allocate_device(im.device_region);
  im.host_base = backend_->allocate_pinned(im.host_region);

  // Guard patterns: the whole host region, and the device gaps between slots.
  std::memset(im.host_base, static_cast<int>(kGuardByte), im.host_region);
  const std::vector<std::byte> pattern(std::max(kGuardBytes, im.device_stride - im.chunk_bytes),
                                       kGuardByte);
  backend_->copy_host_to_device(im.device_base, pattern.data(), kGuardBytes);
  for (size_t s = 0; s < device_slots_; ++s) {
    backend_->copy_host_to_device(im.device_ptr(static_cast<int32_t>(s)) + im.chunk_bytes,
                                  pattern.data(), im.device_stride - im.chunk_bytes);
  }
  for (size_t s = device_slots_; s-- > 0;) im.free_device.push_back(static_cast<int32_t>(s));
  for (size_t s = host_slots_; s-- > 0;) im.free_host.push_back(static_cast<int32_t>(s));

  if (!o.disk_dir.empty()) {
    im.disk.emplace(DiskTier::plan_directory(o.disk_dir, identity_.plan_fingerprint,
                                             identity_.model_fingerprint),
                    DiskTierOptions{.fsync = o.disk_fsync, .io_hook = o.disk_io_hook});
    im.disk_max_files = o.disk_capacity_bytes / im.stored_bytes;
    if (im.disk_max_files == 0) {
      fail(ErrorCode::kInvalidArgument, "disk capacity {} bytes holds no chunk of {} bytes",
           o.disk_capacity_bytes, im.stored_bytes);
    }
    for (const uint64_t key : im.disk->scan()) {
      Entry& e = im.index[key];
      e.on_disk = true;
      Impl::touch(im.disk_lru, e.disk_lru, e.in_disk_lru, key);
      ++im.disk_files;
    }
  }
}

OffloadRuntime::~OffloadRuntime() {
  // Queued transfers read layout_ and backend_: finish them before those members go.
  impl_.reset();
}

std::vector<uint64_t> OffloadRuntime::keys(std::span<const uint32_t> tokens) const {
  return chunk_keys({identity_.model_fingerprint, identity_.plan_fingerprint}, tokens,
                    layout_.chunk_tokens());
}

std::optional<DeviceChunk> OffloadRuntime::try_acquire_device(uint64_t key) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  auto [it, inserted] = im.index.try_emplace(key);
  Entry& e = it->second;
  if (e.device != DeviceState::kNone) return std::nullopt;
  const int32_t slot = im.allocate_device_slot_locked();
  if (slot < 0) {
    im.erase_if_empty(key);
    return std::nullopt;
  }
  e.device_slot = slot;
  e.device = DeviceState::kWriting;
  e.device_users = 1;
  return DeviceChunk{key, slot, im.device_ptr(slot), im.chunk_bytes};
}

DeviceChunk OffloadRuntime::acquire_device(uint64_t key) {
  std::optional<DeviceChunk> c = try_acquire_device(key);
  if (!c) {
    fail(ErrorCode::kResourceExhausted,
         "chunk {}: no device slot (already on the device, or all {} slots pinned or in use)",
         hash_hex(key), device_slots_);
  }
  return *c;
}

void OffloadRuntime::release(const DeviceChunk& chunk) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  auto it = im.index.find(chunk.key);
  if (it == im.index.end() || it->second.device_slot != chunk.slot ||
      it->second.device_users == 0) {
    fail(ErrorCode::kInvalidArgument, "release of chunk {} slot {}: not held", hash_hex(chunk.key),
         chunk.slot);
  }
  Entry& e = it->second;
  if (--e.device_users == 0 && e.device == DeviceState::kWriting) {
    im.drop_device_locked(e);  // produced but never stored: nothing to keep
    im.erase_if_empty(chunk.key);
  }
}

void OffloadRuntime::write_device(const DeviceChunk& chunk, size_t offset,
                                  std::span<const std::byte> bytes) {
  if (!chunk.valid() || offset > chunk.bytes || bytes.size() > chunk.bytes - offset) {
    fail(ErrorCode::kOutOfRange, "write of {} bytes at offset {}: the chunk holds {} bytes",
         bytes.size(), offset, chunk.bytes);
  }
  backend_->copy_host_to_device(chunk.data + offset, bytes.data(), bytes.size());
}

void OffloadRuntime::read_device(const DeviceChunk& chunk, size_t offset,
                                 std::span<std::byte> bytes) const {
  if (!chunk.valid() || offset > chunk.bytes || bytes.size() > chunk.bytes - offset) {
    fail(ErrorCode::kOutOfRange, "read of {} bytes at offset {}: the chunk holds {} bytes",
         bytes.size(), offset, chunk.bytes);
  }
  backend_->copy_device_to_host(bytes.data(), chunk.data + offset, bytes.size());
}

std::shared_future<TransferStatus> OffloadRuntime::store(const DeviceChunk& chunk,
                                                         DeviceFence fence) {
  Impl& im = *impl_;
  auto done = std::make_shared<std::promise<TransferStatus>>();
  std::shared_future<TransferStatus> result = done->get_future().share();
  bool copy_to_host = false;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    auto it = im.index.find(chunk.key);
    if (it == im.index.end() || it->second.device_slot != chunk.slot ||
        it->second.device_users == 0) {
      fail(ErrorCode::kInvalidArgument, "store of chunk {} slot {}: not held", hash_hex(chunk.key),
           chunk.slot);
    }
    Entry& e = it->second;
    // Visible only once the store worker has seen the producer's fence (run_store); the store's
    // hold keeps the slot from being dropped or evicted until then.
    if (e.device == DeviceState::kWriting) e.device = DeviceState::kPublishing;
    ++e.device_users;
    if (e.host != HostState::kNone || e.on_disk || e.disk_busy) {
      ++im.counters.stores_deduplicated;
    } else {
      e.host = HostState::kWriting;
      copy_to_host = true;
    }
  }
  im.store_worker.post([&im, key = chunk.key, slot = chunk.slot, fence, copy_to_host, done] {
    TransferStatus status;
    try {
      status = im.run_store(key, slot, fence, copy_to_host);
    } catch (const std::exception& err) {
      status = im.unexpected_failure("store", err);
    }
    done->set_value(std::move(status));
  });
  return result;
}

LookupResult OffloadRuntime::lookup(std::span<const uint32_t> tokens) {
  Impl& im = *impl_;
  LookupResult r;
  r.keys = keys(tokens);
  r.locations.assign(r.keys.size(), Tier::kMiss);
  std::lock_guard<std::mutex> lock(im.mu);
  for (size_t i = 0; i < r.keys.size(); ++i) {
    auto it = im.index.find(r.keys[i]);
    if (it == im.index.end()) break;
    const Entry& e = it->second;
    Tier t = Tier::kMiss;
    if (e.device == DeviceState::kReady) {
      t = Tier::kDevice;
      ++im.counters.hits_device;
    } else if (e.host == HostState::kReady) {
      t = Tier::kHost;
      ++im.counters.hits_host;
    } else if (e.on_disk && !e.disk_busy) {
      t = Tier::kDisk;
      ++im.counters.hits_disk;
    } else {
      break;
    }
    r.locations[i] = t;
    ++r.prefix_chunks;
  }
  r.prefix_tokens = r.prefix_chunks * layout_.chunk_tokens();
  ++im.counters.lookups;
  if (r.prefix_tokens < tokens.size()) {
    ++im.counters.misses;
    im.counters.recomputed_tokens += tokens.size() - r.prefix_tokens;
  }
  return r;
}

std::shared_future<LoadResult> OffloadRuntime::load(std::span<const uint32_t> tokens,
                                                    size_t max_chunks) {
  Impl& im = *impl_;
  std::vector<uint64_t> k = keys(tokens);
  if (k.size() > max_chunks) k.resize(max_chunks);
  auto done = std::make_shared<std::promise<LoadResult>>();
  std::shared_future<LoadResult> result = done->get_future().share();
  im.load_worker.post([&im, k = std::move(k), done] {
    LoadResult loaded;
    try {
      loaded = im.run_load(k);
    } catch (const std::exception& err) {
      // Chunks this load had already taken stay held: a leak of device slots on a path that
      // only a bug or an allocation failure reaches, instead of handing out unknown state.
      loaded.status = im.unexpected_failure("load", err);
    }
    done->set_value(std::move(loaded));
  });
  return result;
}

bool OffloadRuntime::pin(uint64_t key) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  auto it = im.index.find(key);
  if (it == im.index.end()) return false;
  ++it->second.pins;
  return true;
}

bool OffloadRuntime::unpin(uint64_t key) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  auto it = im.index.find(key);
  if (it == im.index.end() || it->second.pins == 0) return false;
  --it->second.pins;
  return true;
}

bool OffloadRuntime::evict(uint64_t key) {
  return evict_from(key, Tier::kMiss);
}

bool OffloadRuntime::evict_from(uint64_t key, Tier tier) {
  Impl& im = *impl_;
  const bool all = tier == Tier::kMiss;
  std::lock_guard<std::mutex> lock(im.mu);
  auto it = im.index.find(key);
  if (it == im.index.end()) return true;
  Entry& e = it->second;
  if (e.pins > 0) return false;
  if ((all || tier == Tier::kDevice) && e.device == DeviceState::kReady && e.device_users == 0) {
    im.drop_device_locked(e);
    ++im.counters.evictions_device;
  }
  if ((all || tier == Tier::kHost) && e.host == HostState::kReady && e.host_readers == 0) {
    im.drop_host_locked(key, e);
    ++im.counters.evictions_host;
  }
  if ((all || tier == Tier::kDisk) && e.on_disk && e.disk_readers == 0 && !e.disk_busy) {
    im.drop_disk_locked(key, e);
    ++im.counters.evictions_disk;
  }
  const bool device_gone = e.device == DeviceState::kNone;
  const bool host_gone = e.host == HostState::kNone;
  const bool disk_gone = !e.on_disk && !e.disk_busy;
  im.erase_if_empty(key);
  switch (tier) {
    case Tier::kDevice:
      return device_gone;
    case Tier::kHost:
      return host_gone;
    case Tier::kDisk:
      return disk_gone;
    case Tier::kMiss:
      break;
  }
  return device_gone && host_gone && disk_gone;
}

void OffloadRuntime::flush() {
  impl_->store_worker.drain();
  impl_->load_worker.drain();
}

RuntimeStats OffloadRuntime::stats() const {
  RuntimeStats s;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    s = impl_->counters;
  }
  s.transfer_errors += impl_->store_worker.failed_jobs() + impl_->load_worker.failed_jobs();
  std::lock_guard<std::mutex> lock(impl_->fit_mu);
  s.device_to_host = impl_->fit_d2h.result();
  s.host_to_device = impl_->fit_h2d.result();
  s.disk_write = impl_->fit_disk_write.result();
  s.disk_read = impl_->fit_disk_read.result();
  return s;
}

uint64_t OffloadRuntime::count_guard_violations() const {
  const Impl& im = *impl_;
  uint64_t bad = 0;
  auto count = [&](const std::byte* p, size_t n) {
    for (size_t i = 0; i < n; ++i) bad += p[i] != kGuardByte;
  };
  std::vector<std::byte> buf(std::max(kGuardBytes, im.device_stride - im.chunk_bytes));
  backend_->copy_device_to_host(buf.data(), im.device_base, kGuardBytes);
  count(buf.data(), kGuardBytes);
  for (size_t s = 0; s < device_slots_; ++s) {
    const size_t n = im.device_stride - im.chunk_bytes;
    backend_->copy_device_to_host(buf.data(),
                                  im.device_ptr(static_cast<int32_t>(s)) + im.chunk_bytes, n);
    count(buf.data(), n);
  }
  count(im.host_base, kGuardBytes);
  for (size_t s = 0; s < host_slots_; ++s) {
    count(im.host_ptr(static_cast<int32_t>(s)) + im.stored_bytes, im.host_stride - im.stored_bytes);
  }
  return bad;
}

std::span<std::byte> OffloadRuntime::host_object_bytes_for_testing(uint64_t key) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  auto it = im.index.find(key);
  if (it == im.index.end() || it->second.host != HostState::kReady) return {};
  return {im.host_ptr(it->second.host_slot), im.stored_bytes};
}

std::optional<std::filesystem::path> OffloadRuntime::disk_path_for_testing(uint64_t key) const {
  if (!impl_->disk) return std::nullopt;
  return impl_->disk->path_of(key);
}

}  // namespace kvplan
