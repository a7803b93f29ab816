// OffloadRuntime's store path, on the store worker: publish a produced chunk on the device once
// its fence completes, then copy it into a host slot as stored objects (headers + payloads).
#include "runtime/offload_runtime_impl.h"

#include <chrono>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

namespace kvplan {

void OffloadRuntime::Impl::seal_payload_checksums(std::byte* stored) const {
  for (const TransferGroup& g : rt.layout().groups()) {
    std::byte* rec = stored + record_offsets[g.index];
    StoredObjectHeader h;
    std::memcpy(&h, rec, sizeof h);
    h.payload_checksum = hash_pool->checksum(rec + sizeof h, g.chunk_bytes);
    seal_object_header(h);
    std::memcpy(rec, &h, sizeof h);
  }
}

TransferStatus OffloadRuntime::Impl::run_store(uint64_t key, int32_t device_slot, DeviceFence fence,
                                               bool copy_to_host) {
  try {
    backend->wait_fence(fence);
  } catch (const std::exception& err) {
    // The producer's writes may not have landed: the chunk is never published, and leaves the
    // device with its last holder.
    std::lock_guard<std::mutex> lock(mu);
    ChunkEntry& e = index.at(key);
    if (copy_to_host) e.host = HostState::kNone;
    if (e.device == DeviceState::kPublishing) e.device = DeviceState::kWriting;
    ++counters.stores_failed;
    TransferStatus status = transfer_failure_locked("store fence", key, as_error(err));
    release_device_user_locked(key, e);
    return status;
  }
  std::unique_lock<std::mutex> lock(mu);
  ChunkEntry& e = index.at(key);
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

}  // namespace kvplan
