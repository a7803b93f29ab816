// OffloadRuntime's chunk index: entries per chunk, an LRU list per tier, slot allocation with
// eviction, and the spill of evicted host chunks to the disk tier (offload_runtime_impl.h).
#include "runtime/offload_runtime_impl.h"

#include <chrono>
#include <mutex>
#include <optional>

#include <spdlog/spdlog.h>

#include "core/hash.h"

namespace kvplan {

void OffloadRuntime::Impl::erase_if_empty(uint64_t key) {
  auto it = index.find(key);
  if (it == index.end()) return;
  const ChunkEntry& e = it->second;
  if (e.device == DeviceState::kNone && e.host == HostState::kNone && !e.on_disk && !e.disk_busy &&
      e.device_users == 0 && e.host_readers == 0 && e.disk_readers == 0) {
    index.erase(it);
  }
}

void OffloadRuntime::Impl::drop_device_locked(ChunkEntry& e) {
  unlink_lru(device_lru, e.device_lru, e.in_device_lru);
  free_device.push_back(e.device_slot);
  e.device_slot = -1;
  e.device = DeviceState::kNone;
}

void OffloadRuntime::Impl::drop_host_locked(uint64_t key, ChunkEntry& e) {
  (void)key;
  unlink_lru(host_lru, e.host_lru, e.in_host_lru);
  free_host.push_back(e.host_slot);
  e.host_slot = -1;
  e.host = HostState::kNone;
}

void OffloadRuntime::Impl::drop_disk_locked(uint64_t key, ChunkEntry& e) {
  unlink_lru(disk_lru, e.disk_lru, e.in_disk_lru);
  disk->remove(key);
  e.on_disk = false;
  --disk_files;
}

int32_t OffloadRuntime::Impl::allocate_device_slot_locked() {
  if (!free_device.empty()) {
    const int32_t slot = free_device.back();
    free_device.pop_back();
    return slot;
  }
  for (auto it = device_lru.rbegin(); it != device_lru.rend(); ++it) {
    const uint64_t key = *it;
    ChunkEntry& v = index.at(key);
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

bool OffloadRuntime::Impl::reserve_disk_file_locked() {
  while (disk_files >= disk_max_files) {
    bool evicted = false;
    for (auto it = disk_lru.rbegin(); it != disk_lru.rend(); ++it) {
      const uint64_t key = *it;
      ChunkEntry& v = index.at(key);
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

int32_t OffloadRuntime::Impl::allocate_host_slot(std::unique_lock<std::mutex>& lock) {
  for (;;) {
    if (!free_host.empty()) {
      const int32_t slot = free_host.back();
      free_host.pop_back();
      return slot;
    }
    uint64_t victim_key = 0;
    ChunkEntry* victim = nullptr;
    for (auto it = host_lru.rbegin(); it != host_lru.rend(); ++it) {
      ChunkEntry& v = index.at(*it);
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

void OffloadRuntime::Impl::release_device_user_locked(uint64_t key, ChunkEntry& e) {
  if (--e.device_users == 0 && e.device == DeviceState::kWriting) {
    drop_device_locked(e);
    erase_if_empty(key);
  }
}

}  // namespace kvplan
