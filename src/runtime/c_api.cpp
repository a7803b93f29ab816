// The extern "C" API over OffloadRuntime: every entry point catches everything, stores the
// message per thread and returns a status code.
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <variant>

#include "kvplan/kvplan_runtime.h"
#include "plan/plan.h"
#include "runtime/offload_runtime.h"

struct kvplan_options {
  kvplan::RuntimeOptions options;
  bool skip_model_check = false;  // kvplan_options_set_skip_model_check
  bool require_gpu = false;       // kvplan_options_set_require_gpu
};

struct kvplan_runtime {
  std::unique_ptr<kvplan::OffloadRuntime> rt;
  std::string backend_name;  // a NUL-terminated copy for kvplan_runtime_backend_name
};

struct kvplan_device_chunk {
  kvplan::DeviceChunk chunk;
};

struct kvplan_transfer {
  kvplan_runtime* owner = nullptr;
  std::variant<std::shared_future<kvplan::TransferStatus>, std::shared_future<kvplan::LoadResult>>
      future;
  std::vector<bool> taken;
};

namespace {

thread_local std::string g_last_error;

kvplan_status code_of(kvplan::ErrorCode code) {
  switch (code) {
    case kvplan::ErrorCode::kInvalidArgument:
      return KVPLAN_INVALID_ARGUMENT;
    case kvplan::ErrorCode::kNotFound:
      return KVPLAN_NOT_FOUND;
    case kvplan::ErrorCode::kOutOfRange:
      return KVPLAN_OUT_OF_RANGE;
    case kvplan::ErrorCode::kDataLoss:
      return KVPLAN_DATA_LOSS;
    case kvplan::ErrorCode::kResourceExhausted:
      return KVPLAN_RESOURCE_EXHAUSTED;
    case kvplan::ErrorCode::kUnimplemented:
      return KVPLAN_UNIMPLEMENTED;
    case kvplan::ErrorCode::kInternal:
      return KVPLAN_INTERNAL;
    case kvplan::ErrorCode::kIo:
      return KVPLAN_IO;
  }
  return KVPLAN_INTERNAL;
}

kvplan_status set_error(kvplan_status code, std::string message) {
  g_last_error = std::move(message);
  return code;
}

template <typename F>
kvplan_status guarded(F&& body) {
  try {
    g_last_error.clear();
    return body();
  } catch (const kvplan::Error& e) {
    return set_error(code_of(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return set_error(KVPLAN_RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    return set_error(KVPLAN_INTERNAL, e.what());
  } catch (...) {
    return set_error(KVPLAN_INTERNAL, "unknown exception");
  }
}

#define KVPLAN_REQUIRE(cond, what)                                             \
  do {                                                                         \
    if (!(cond)) return set_error(KVPLAN_INVALID_ARGUMENT, std::string(what)); \
  } while (0)

std::span<const uint32_t> token_span(const uint32_t* tokens, uint64_t n) {
  return {tokens, static_cast<size_t>(n)};
}

std::string describe_model(const kvplan::Plan& plan) {
  const kvplan::KvGeometry& g = plan.model.geometry;
  bool uniform = true;
  for (const kvplan::KvLayerGeometry& l : g.layers) {
    uniform =
        uniform && l.n_kv_heads == g.layers[0].n_kv_heads && l.head_dim == g.layers[0].head_dim;
  }
  const std::string shape = uniform && !g.layers.empty()
                                ? fmt::format("{} layers, {} KV heads x head_dim {}", g.n_layers(),
                                              g.layers[0].n_kv_heads, g.layers[0].head_dim)
                                : fmt::format("{} layers of differing KV geometry", g.n_layers());
  return fmt::format("'{}': {}, model fingerprint {}", plan.model.name, shape,
                     plan.model.fingerprint.empty() ? "(none recorded)" : plan.model.fingerprint);
}

// The C API's half of "a plan for another model is refused": the runtime checks what it is given
// (geometry, fingerprint); here a caller that gives nothing, or a fingerprint that a plan without
// one cannot be compared with, is refused too, so an unchecked plan is always the caller's choice.
void require_served_model(const kvplan::Plan& plan, const char* plan_path,
                          const kvplan_options* o) {
  const bool has_fingerprint = o != nullptr && !o->options.model_fingerprint.empty();
  const bool has_geometry = o != nullptr && o->options.model_geometry.has_value();
  const bool skip = o != nullptr && o->skip_model_check;
  if (!has_fingerprint && !has_geometry && !skip) {
    kvplan::fail(kvplan::ErrorCode::kInvalidArgument,
                 "{}: no served model to check the plan against (the plan is for {}): name it "
                 "with kvplan_options_set_model_geometry or "
                 "kvplan_options_set_model_fingerprint, or waive the check with "
                 "kvplan_options_set_skip_model_check",
                 plan_path, describe_model(plan));
  }
  if (has_fingerprint && !has_geometry && plan.model.fingerprint.empty()) {
    kvplan::fail(kvplan::ErrorCode::kInvalidArgument,
                 "{}: the plan records no model fingerprint, so the served model's fingerprint "
                 "{} cannot be checked against it: give the model's geometry with "
                 "kvplan_options_set_model_geometry (the plan is for {})",
                 plan_path, o->options.model_fingerprint, describe_model(plan));
  }
}

std::shared_ptr<kvplan::DeviceBackend> make_backend(bool require_gpu) {
  if (!require_gpu) return kvplan::make_default_device_backend();
  try {
    return kvplan::make_device_backend({kvplan::DeviceRequest::Kind::kGpu, 0});
  } catch (const kvplan::Error& e) {
    kvplan::fail(e.code(),
                 "kvplan_runtime_create: a GPU is required (kvplan_options_set_require_gpu) but "
                 "none can be used: {}",
                 e.what());
  }
}

kvplan::KvSide side_of(int32_t side) {
  return side == KVPLAN_KEY ? kvplan::KvSide::kKey : kvplan::KvSide::kValue;
}

// The layout's run `run` of `layer`; `one_pair_call` names a layer-addressed call, which refuses a
// layer of several head runs rather than give its first run's page.
const kvplan::PageRun& head_run(const kvplan_runtime* rt, uint32_t layer, uint32_t run,
                                const char* one_pair_call = nullptr) {
  const kvplan::PlanLayout& l = rt->rt->layout();
  const kvplan::LayerPageGeometry& g = l.layer(static_cast<int>(layer));
  if (one_pair_call != nullptr && g.per_head()) {
    kvplan::fail(kvplan::ErrorCode::kInvalidArgument,
                 "{}: layer {} gives its KV heads {} runs of different pairs; address a run with "
                 "kvplan_runtime_run_*",
                 one_pair_call, layer, g.runs.size());
  }
  return l.run(static_cast<int>(layer), static_cast<int>(run));
}

kvplan_status page_info(const kvplan_runtime* rt, uint32_t layer, uint32_t run, uint64_t page,
                        int32_t side, uint64_t* offset, uint64_t* bytes, uint64_t* n_values,
                        const char* one_pair_call) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && (side == KVPLAN_KEY || side == KVPLAN_VALUE),
                   "page_info: expected a runtime and side KVPLAN_KEY or KVPLAN_VALUE");
    const kvplan::PageRun& r = head_run(rt, layer, run, one_pair_call);
    const kvplan::PlanLayout& l = rt->rt->layout();
    if (offset != nullptr)
      *offset = l.page_offset(r.layer, static_cast<size_t>(page), side_of(side), r.run);
    if (bytes != nullptr) *bytes = l.page_bytes(r.layer, side_of(side), r.run);
    if (n_values != nullptr) *n_values = l.page_values(r.layer, r.run);
    return KVPLAN_OK;
  });
}

kvplan_status pack_page(const kvplan_runtime* rt, uint32_t layer, uint32_t run, int32_t side,
                        const float* values, uint64_t n_values, uint8_t* out, uint64_t bytes,
                        const char* one_pair_call) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && values != nullptr && out != nullptr,
                   "pack_page: NULL argument");
    const kvplan::PageRun& r = head_run(rt, layer, run, one_pair_call);
    rt->rt->layout().pack_page(r.layer, side_of(side), {values, static_cast<size_t>(n_values)},
                               {out, static_cast<size_t>(bytes)}, r.run);
    return KVPLAN_OK;
  });
}

kvplan_status unpack_page(const kvplan_runtime* rt, uint32_t layer, uint32_t run, int32_t side,
                          const uint8_t* packed, uint64_t bytes, float* values, uint64_t n_values,
                          const char* one_pair_call) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && values != nullptr && packed != nullptr,
                   "unpack_page: NULL argument");
    const kvplan::PageRun& r = head_run(rt, layer, run, one_pair_call);
    rt->rt->layout().unpack_page(r.layer, side_of(side), {packed, static_cast<size_t>(bytes)},
                                 {values, static_cast<size_t>(n_values)}, r.run);
    return KVPLAN_OK;
  });
}

}  // namespace

extern "C" {

const char* kvplan_last_error_message(void) {
  return g_last_error.c_str();
}

uint32_t kvplan_runtime_abi_version(void) {
  return KVPLAN_RUNTIME_ABI_VERSION;
}

kvplan_status kvplan_options_create(kvplan_options** out) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(out != nullptr, "kvplan_options_create: out is NULL");
    *out = new kvplan_options();
    return KVPLAN_OK;
  });
}

void kvplan_options_destroy(kvplan_options* options) {
  delete options;
}

kvplan_status kvplan_options_set_chunk_tokens(kvplan_options* o, uint64_t tokens) {
  KVPLAN_REQUIRE(o != nullptr && tokens > 0, "chunk tokens: expected a handle and tokens > 0");
  o->options.chunk_tokens = static_cast<size_t>(tokens);
  return KVPLAN_OK;
}

kvplan_status kvplan_options_set_device_capacity_bytes(kvplan_options* o, uint64_t b) {
  KVPLAN_REQUIRE(o != nullptr, "options handle is NULL");
  o->options.device_capacity_bytes = b;
  return KVPLAN_OK;
}

kvplan_status kvplan_options_set_host_capacity_bytes(kvplan_options* o, uint64_t b) {
  KVPLAN_REQUIRE(o != nullptr, "options handle is NULL");
  o->options.host_capacity_bytes = b;
  return KVPLAN_OK;
}

kvplan_status kvplan_options_set_disk(kvplan_options* o, const char* dir, uint64_t capacity_bytes,
                                      int32_t fsync) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(o != nullptr, "options handle is NULL");
    o->options.disk_dir = dir != nullptr ? dir : "";
    o->options.disk_capacity_bytes = capacity_bytes;
    o->options.disk_fsync = fsync != 0;
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_options_set_model_fingerprint(kvplan_options* o, const char* hex) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(o != nullptr, "options handle is NULL");
    o->options.model_fingerprint = hex != nullptr ? hex : "";
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_options_set_skip_model_check(kvplan_options* o, int32_t skip) {
  KVPLAN_REQUIRE(o != nullptr, "options handle is NULL");
  o->skip_model_check = skip != 0;
  return KVPLAN_OK;
}

kvplan_status kvplan_options_set_require_gpu(kvplan_options* o, int32_t required) {
  KVPLAN_REQUIRE(o != nullptr, "options handle is NULL");
  o->require_gpu = required != 0;
  return KVPLAN_OK;
}

kvplan_status kvplan_options_set_hash_threads(kvplan_options* o, int32_t threads) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(o != nullptr && threads >= -1 && threads <= 256,
                   "hash threads: expected a handle and -1 (the backend's choice) or 0..256");
    o->options.hash_threads = threads;
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_options_set_model_geometry(kvplan_options* o, int32_t n_layers,
                                                int32_t n_kv_heads, int32_t head_dim) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(o != nullptr && n_layers > 0 && n_kv_heads > 0 && head_dim > 0,
                   "model geometry: expected a handle and positive layers, KV heads, head_dim");
    o->options.model_geometry =
        kvplan::KvGeometry::uniform("model", n_layers, n_kv_heads, head_dim);
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_create(const char* plan_path, const kvplan_options* options,
                                    kvplan_runtime** out) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(plan_path != nullptr && out != nullptr,
                   "kvplan_runtime_create: plan_path and out must not be NULL");
    *out = nullptr;
    const kvplan::Plan plan = kvplan::read_plan(plan_path);
    require_served_model(plan, plan_path, options);
    kvplan::RuntimeOptions ro = options != nullptr ? options->options : kvplan::RuntimeOptions{};
    ro.backend = make_backend(options != nullptr && options->require_gpu);
    auto handle = std::make_unique<kvplan_runtime>();
    handle->rt = std::make_unique<kvplan::OffloadRuntime>(plan, std::move(ro));
    handle->backend_name = std::string(handle->rt->backend().name());
    *out = handle.release();
    return KVPLAN_OK;
  });
}

void kvplan_runtime_destroy(kvplan_runtime* rt) {
  try {
    delete rt;
  } catch (...) {
  }
}

const char* kvplan_runtime_backend_name(const kvplan_runtime* rt) {
  return rt != nullptr ? rt->backend_name.c_str() : "";
}

uint64_t kvplan_runtime_chunk_tokens(const kvplan_runtime* rt) {
  return rt != nullptr ? rt->rt->layout().chunk_tokens() : 0;
}

uint64_t kvplan_runtime_chunk_bytes(const kvplan_runtime* rt) {
  return rt != nullptr ? rt->rt->layout().chunk_bytes() : 0;
}

uint32_t kvplan_runtime_layer_count(const kvplan_runtime* rt) {
  return rt != nullptr ? static_cast<uint32_t>(rt->rt->layout().n_layers()) : 0;
}

uint32_t kvplan_runtime_transfer_group_count(const kvplan_runtime* rt) {
  return rt != nullptr ? static_cast<uint32_t>(rt->rt->layout().groups().size()) : 0;
}

uint64_t kvplan_runtime_plan_fingerprint(const kvplan_runtime* rt) {
  return rt != nullptr ? rt->rt->identity().plan_fingerprint : 0;
}

kvplan_status kvplan_runtime_page_info(const kvplan_runtime* rt, uint32_t layer, uint64_t page,
                                       int32_t side, uint64_t* offset, uint64_t* bytes,
                                       uint64_t* n_values) {
  return page_info(rt, layer, 0, page, side, offset, bytes, n_values, "page_info");
}

kvplan_status kvplan_runtime_pack_page(const kvplan_runtime* rt, uint32_t layer, int32_t side,
                                       const float* values, uint64_t n_values, uint8_t* out,
                                       uint64_t bytes) {
  return pack_page(rt, layer, 0, side, values, n_values, out, bytes, "pack_page");
}

kvplan_status kvplan_runtime_unpack_page(const kvplan_runtime* rt, uint32_t layer, int32_t side,
                                         const uint8_t* packed, uint64_t bytes, float* values,
                                         uint64_t n_values) {
  return unpack_page(rt, layer, 0, side, packed, bytes, values, n_values, "unpack_page");
}

uint32_t kvplan_runtime_head_run_count(const kvplan_runtime* rt, uint32_t layer) {
  if (rt == nullptr || layer >= static_cast<uint32_t>(rt->rt->layout().n_layers())) return 0;
  return static_cast<uint32_t>(rt->rt->layout().layer(static_cast<int>(layer)).runs.size());
}

kvplan_status kvplan_runtime_head_run_info(const kvplan_runtime* rt, uint32_t layer, uint32_t run,
                                           uint32_t* first_head, uint32_t* n_heads) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr, "head_run_info: NULL runtime");
    const kvplan::PageRun& r = head_run(rt, layer, run);
    if (first_head != nullptr) *first_head = static_cast<uint32_t>(r.first_head);
    if (n_heads != nullptr) *n_heads = static_cast<uint32_t>(r.n_kv_heads);
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_run_page_info(const kvplan_runtime* rt, uint32_t layer, uint32_t run,
                                           uint64_t page, int32_t side, uint64_t* offset,
                                           uint64_t* bytes, uint64_t* n_values) {
  return page_info(rt, layer, run, page, side, offset, bytes, n_values, nullptr);
}

kvplan_status kvplan_runtime_pack_run_page(const kvplan_runtime* rt, uint32_t layer, uint32_t run,
                                           int32_t side, const float* values, uint64_t n_values,
                                           uint8_t* out, uint64_t bytes) {
  return pack_page(rt, layer, run, side, values, n_values, out, bytes, nullptr);
}

kvplan_status kvplan_runtime_unpack_run_page(const kvplan_runtime* rt, uint32_t layer, uint32_t run,
                                             int32_t side, const uint8_t* packed, uint64_t bytes,
                                             float* values, uint64_t n_values) {
  return unpack_page(rt, layer, run, side, packed, bytes, values, n_values, nullptr);
}

kvplan_status kvplan_runtime_chunk_keys(const kvplan_runtime* rt, const uint32_t* tokens,
                                        uint64_t n_tokens, uint64_t* keys, uint64_t capacity,
                                        uint64_t* n_keys) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && (tokens != nullptr || n_tokens == 0),
                   "chunk_keys: NULL argument");
    const std::vector<uint64_t> k = rt->rt->keys(token_span(tokens, n_tokens));
    for (size_t i = 0; i < k.size() && i < capacity && keys != nullptr; ++i) keys[i] = k[i];
    if (n_keys != nullptr) *n_keys = k.size();
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_acquire_chunk(kvplan_runtime* rt, const uint32_t* tokens,
                                           uint64_t n_tokens, uint64_t chunk_index,
                                           kvplan_device_chunk** out) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && tokens != nullptr && out != nullptr,
                   "acquire_chunk: NULL argument");
    *out = nullptr;
    const std::vector<uint64_t> k = rt->rt->keys(token_span(tokens, n_tokens));
    if (chunk_index >= k.size()) {
      return set_error(KVPLAN_OUT_OF_RANGE, fmt::format("chunk {}: {} tokens hold {} whole chunks",
                                                        chunk_index, n_tokens, k.size()));
    }
    const kvplan::DeviceChunk c = rt->rt->acquire_device(k[chunk_index]);
    *out = new kvplan_device_chunk{c};
    return KVPLAN_OK;
  });
}

void* kvplan_device_chunk_data(const kvplan_device_chunk* c) {
  return c != nullptr ? c->chunk.data : nullptr;
}

uint64_t kvplan_device_chunk_bytes(const kvplan_device_chunk* c) {
  return c != nullptr ? c->chunk.bytes : 0;
}

uint64_t kvplan_device_chunk_key(const kvplan_device_chunk* c) {
  return c != nullptr ? c->chunk.key : 0;
}

kvplan_status kvplan_device_chunk_write(kvplan_runtime* rt, const kvplan_device_chunk* c,
                                        uint64_t offset, const void* src, uint64_t bytes) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && c != nullptr && (src != nullptr || bytes == 0),
                   "device_chunk_write: NULL argument");
    rt->rt->write_device(c->chunk, static_cast<size_t>(offset),
                         {static_cast<const std::byte*>(src), static_cast<size_t>(bytes)});
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_device_chunk_read(kvplan_runtime* rt, const kvplan_device_chunk* c,
                                       uint64_t offset, void* dst, uint64_t bytes) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && c != nullptr && (dst != nullptr || bytes == 0),
                   "device_chunk_read: NULL argument");
    rt->rt->read_device(c->chunk, static_cast<size_t>(offset),
                        {static_cast<std::byte*>(dst), static_cast<size_t>(bytes)});
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_device_chunk_release(kvplan_runtime* rt, kvplan_device_chunk* c) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && c != nullptr, "device_chunk_release: NULL argument");
    std::unique_ptr<kvplan_device_chunk> owned(c);
    rt->rt->release(owned->chunk);
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_store(kvplan_runtime* rt, const kvplan_device_chunk* c,
                                   void* producer_stream, kvplan_transfer** out) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && c != nullptr && out != nullptr, "store: NULL argument");
    *out = nullptr;
    auto t = std::make_unique<kvplan_transfer>();
    t->owner = rt;
    t->future = rt->rt->store(c->chunk, rt->rt->backend().record_fence(producer_stream));
    *out = t.release();
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_lookup(kvplan_runtime* rt, const uint32_t* tokens, uint64_t n_tokens,
                                    int32_t* tiers, uint64_t capacity, uint64_t* prefix_chunks) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && (tokens != nullptr || n_tokens == 0), "lookup: NULL argument");
    const kvplan::LookupResult r = rt->rt->lookup(token_span(tokens, n_tokens));
    for (size_t i = 0; i < r.locations.size() && i < capacity && tiers != nullptr; ++i) {
      tiers[i] = static_cast<int32_t>(r.locations[i]);
    }
    if (prefix_chunks != nullptr) *prefix_chunks = r.prefix_chunks;
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_load(kvplan_runtime* rt, const uint32_t* tokens, uint64_t n_tokens,
                                  uint64_t max_chunks, kvplan_transfer** out) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && (tokens != nullptr || n_tokens == 0) && out != nullptr,
                   "load: NULL argument");
    *out = nullptr;
    auto t = std::make_unique<kvplan_transfer>();
    t->owner = rt;
    t->future = rt->rt->load(token_span(tokens, n_tokens), static_cast<size_t>(max_chunks));
    *out = t.release();
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_pin(kvplan_runtime* rt, uint64_t key, int32_t pinned) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr, "pin: NULL runtime");
    const bool ok = pinned != 0 ? rt->rt->pin(key) : rt->rt->unpin(key);
    if (!ok) return set_error(KVPLAN_NOT_FOUND, fmt::format("chunk {:016x} is not cached", key));
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_evict(kvplan_runtime* rt, uint64_t key, int32_t tier) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && tier >= KVPLAN_TIER_MISS && tier <= KVPLAN_TIER_DISK,
                   "evict: expected a runtime and a KVPLAN_TIER_* value");
    if (!rt->rt->evict_from(key, static_cast<kvplan::Tier>(tier))) {
      return set_error(KVPLAN_RESOURCE_EXHAUSTED,
                       fmt::format("chunk {:016x} is pinned or in use", key));
    }
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_flush(kvplan_runtime* rt) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr, "flush: NULL runtime");
    rt->rt->flush();
    return KVPLAN_OK;
  });
}

kvplan_status kvplan_runtime_stats(const kvplan_runtime* rt, kvplan_stats* out) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(rt != nullptr && out != nullptr, "stats: NULL argument");
    const kvplan::RuntimeStats s = rt->rt->stats();
    *out = kvplan_stats{s.bytes_device_to_host,
                        s.bytes_host_to_device,
                        s.bytes_to_disk,
                        s.bytes_from_disk,
                        s.stores_ok,
                        s.stores_failed,
                        s.stores_deduplicated,
                        s.loads_chunks,
                        s.lookups,
                        s.hits_device,
                        s.hits_host,
                        s.hits_disk,
                        s.misses,
                        s.recomputed_tokens,
                        s.evictions_device,
                        s.evictions_host,
                        s.evictions_disk,
                        s.refusals,
                        s.device_to_host.bytes_per_second,
                        s.device_to_host.t0_seconds,
                        s.host_to_device.bytes_per_second,
                        s.host_to_device.t0_seconds};
    return KVPLAN_OK;
  });
}

uint64_t kvplan_runtime_refusals(const kvplan_runtime* rt) {
  return rt != nullptr ? rt->rt->stats().refusals : 0;
}

kvplan_status kvplan_transfer_wait(kvplan_transfer* t) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(t != nullptr, "transfer_wait: NULL transfer");
    const kvplan::TransferStatus* s = nullptr;
    if (auto* f = std::get_if<std::shared_future<kvplan::TransferStatus>>(&t->future)) {
      s = &f->get();
    } else {
      auto& lf = std::get<std::shared_future<kvplan::LoadResult>>(t->future);
      s = &lf.get().status;
      if (t->taken.empty()) t->taken.assign(lf.get().chunks.size(), false);
    }
    if (s->ok) return KVPLAN_OK;
    return set_error(code_of(s->code), s->message);
  });
}

int32_t kvplan_transfer_ready(const kvplan_transfer* t) {
  if (t == nullptr) return 0;
  return std::visit(
      [](const auto& f) {
        return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready ? 1 : 0;
      },
      t->future);
}

uint64_t kvplan_transfer_chunk_count(kvplan_transfer* t) {
  if (t == nullptr) return 0;
  auto* lf = std::get_if<std::shared_future<kvplan::LoadResult>>(&t->future);
  if (lf == nullptr) return 0;
  if (t->taken.empty()) t->taken.assign(lf->get().chunks.size(), false);
  return lf->get().chunks.size();
}

kvplan_status kvplan_transfer_take_chunk(kvplan_transfer* t, uint64_t index,
                                         kvplan_device_chunk** out) {
  return guarded([&]() -> kvplan_status {
    KVPLAN_REQUIRE(t != nullptr && out != nullptr, "take_chunk: NULL argument");
    const uint64_t n = kvplan_transfer_chunk_count(t);
    if (index >= n || t->taken[index]) {
      return set_error(
          KVPLAN_OUT_OF_RANGE,
          fmt::format("chunk {}: the load holds {} chunks (or it was taken)", index, n));
    }
    const auto& lf = std::get<std::shared_future<kvplan::LoadResult>>(t->future);
    *out = new kvplan_device_chunk{lf.get().chunks[index]};
    t->taken[index] = true;
    return KVPLAN_OK;
  });
}

void kvplan_transfer_destroy(kvplan_transfer* t) {
  if (t == nullptr) return;
  try {
    if (auto* lf = std::get_if<std::shared_future<kvplan::LoadResult>>(&t->future)) {
      const std::vector<kvplan::DeviceChunk>& chunks = lf->get().chunks;
      for (size_t i = 0; i < chunks.size(); ++i) {
        if (t->taken.empty() || !t->taken[i]) t->owner->rt->release(chunks[i]);
      }
    } else {
      std::get<std::shared_future<kvplan::TransferStatus>>(t->future).wait();
    }
  } catch (...) {
  }
  delete t;
}

}  // extern "C"
