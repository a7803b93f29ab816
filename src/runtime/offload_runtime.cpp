// The public OffloadRuntime API: construction (layout, slot pools with their guard bytes, the disk
// tier's existing chunks) and the caller-facing methods. Transfers run in store_path.cpp and
// load_path.cpp over the chunk index of chunk_index.cpp (see offload_runtime_impl.h).
#include "runtime/offload_runtime.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>

#include "core/hash.h"
#include "plan/plan_fingerprint.h"
#include "runtime/offload_runtime_impl.h"

namespace kvplan {
namespace {

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
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

OffloadRuntime::Impl::~Impl() {
  store_worker.stop();
  load_worker.stop();
  if (device_base != nullptr) backend->free_device(device_base, device_region);
  if (host_base != nullptr) backend->free_pinned(host_base, host_region);
}

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
      ChunkEntry& e = im.index[key];
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
  ChunkEntry& e = it->second;
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
  ChunkEntry& e = it->second;
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
    ChunkEntry& e = it->second;
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
    const ChunkEntry& e = it->second;
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
  ChunkEntry& e = it->second;
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
