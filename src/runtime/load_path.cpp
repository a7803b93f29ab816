// OffloadRuntime's load path, on the load worker: bring a cached prefix onto the device from the
// host or disk tier, checking every stored object before it is handed out.
#include "runtime/offload_runtime_impl.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "core/hash.h"

namespace kvplan {

RefusalReason OffloadRuntime::Impl::copy_in(uint64_t key, const std::byte* src, size_t n,
                                            std::byte* device, bool verify_payload) {
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

LoadResult OffloadRuntime::Impl::run_load(const std::vector<uint64_t>& keys) {
  LoadResult out;
  out.status = status_ok();
  for (const uint64_t key : keys) {
    std::unique_lock<std::mutex> lock(mu);
    auto it = index.find(key);
    if (it == index.end()) break;
    ChunkEntry& e = it->second;
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
      out.status =
          status_error(ErrorCode::kDataLoss,
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

}  // namespace kvplan
