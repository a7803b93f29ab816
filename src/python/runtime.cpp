// kvplan.Runtime: the serving runtime (runtime/offload_runtime.h) from Python — a plan's packed
// chunks cached across the device pool, the pinned host tier and an optional disk tier, keyed by
// chained hashes of the token chunks. Chunks go in and come out as uint8 numpy arrays of
// chunk_bytes (the plan's pages back to back, runtime/plan_layout.h); every transfer is waited
// for, with the GIL released, and a failed or refused one raises kvplan.Error.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "python/bindings.h"
#include "python/ndarray_util.h"
#include "runtime/offload_runtime.h"
#include "runtime/stored_object.h"

namespace nb = nanobind;

namespace kvplan::python {
namespace {

struct Runtime {
  std::unique_ptr<OffloadRuntime> rt;
};

void raise_if_failed(const TransferStatus& s, const char* what) {
  if (!s.ok) fail(s.code, "{}: {}", what, s.message);
}

Runtime make_runtime(const Plan& plan, size_t chunk_tokens, uint64_t device_bytes,
                     uint64_t host_bytes, std::optional<std::filesystem::path> disk_dir,
                     uint64_t disk_bytes, const std::string& model_fingerprint) {
  RuntimeOptions o;
  o.chunk_tokens = chunk_tokens;
  o.device_capacity_bytes = device_bytes;
  o.host_capacity_bytes = host_bytes;
  if (disk_dir) o.disk_dir = *disk_dir;
  o.disk_capacity_bytes = disk_bytes;
  o.model_fingerprint = model_fingerprint;
  nb::gil_scoped_release unlocked;
  return {std::make_unique<OffloadRuntime>(plan, std::move(o))};
}

void store(Runtime& self, const std::vector<uint32_t>& tokens, size_t index,
           CpuArray<uint8_t> payload) {
  OffloadRuntime& rt = *self.rt;
  const size_t bytes = rt.layout().chunk_bytes();
  if (payload.size() != bytes) {
    fail(ErrorCode::kInvalidArgument, "store: a chunk of this plan is {} bytes, got {}", bytes,
         payload.size());
  }
  const std::vector<uint64_t> keys = rt.keys(tokens);
  if (index >= keys.size()) {
    fail(ErrorCode::kOutOfRange, "store: chunk {} of {} tokens; they hold {} whole chunks", index,
         tokens.size(), keys.size());
  }
  nb::gil_scoped_release unlocked;
  const DeviceChunk chunk = rt.acquire_device(keys[index]);
  rt.write_device(chunk, 0, std::as_bytes(std::span(payload.data(), bytes)));
  const TransferStatus status = rt.store(chunk).get();
  rt.release(chunk);
  raise_if_failed(status, "store");
}

// (prefix chunks, prefix tokens, the tier of each whole chunk: "device", "host", "disk", "miss").
std::tuple<size_t, size_t, std::vector<std::string>> lookup(Runtime& self,
                                                            const std::vector<uint32_t>& tokens) {
  const LookupResult r = self.rt->lookup(tokens);
  std::vector<std::string> tiers;
  for (const Tier t : r.locations) tiers.emplace_back(tier_name(t));
  return {r.prefix_chunks, r.prefix_tokens, tiers};
}

std::vector<NumpyArray<uint8_t>> load(Runtime& self, const std::vector<uint32_t>& tokens,
                                      std::optional<size_t> max_chunks) {
  OffloadRuntime& rt = *self.rt;
  const size_t bytes = rt.layout().chunk_bytes();
  std::vector<OwnedArray<uint8_t>> chunks;
  {
    nb::gil_scoped_release unlocked;
    LoadResult r = rt.load(tokens, max_chunks.value_or(SIZE_MAX)).get();
    for (const DeviceChunk& c : r.chunks) {
      OwnedArray<uint8_t>& out = chunks.emplace_back(std::vector<size_t>{bytes});
      rt.read_device(c, 0, std::as_writable_bytes(std::span(out.data.get(), bytes)));
      rt.release(c);
    }
    if (r.chunks.empty()) raise_if_failed(r.status, "load");
  }
  std::vector<NumpyArray<uint8_t>> arrays;
  for (OwnedArray<uint8_t>& c : chunks) arrays.push_back(c.release());
  return arrays;
}

}  // namespace

void bind_runtime(nb::module_& m) {
  nb::class_<Runtime>(m, "Runtime",
                      "The serving runtime: a plan's packed chunks across device, pinned host "
                      "and disk tiers, keyed by token-prefix hashes.")
      .def(nb::new_(&make_runtime), nb::arg("plan"), nb::arg("chunk_tokens") = 256,
           nb::arg("device_bytes") = 256ull << 20, nb::arg("host_bytes") = 1ull << 30,
           nb::arg("disk_dir") = nb::none(), nb::arg("disk_bytes") = 16ull << 30,
           nb::arg("model_fingerprint") = "")
      .def_static(
          "stored_chunk_bytes",
          [](const Plan& plan, size_t chunk_tokens) {
            return stored_chunk_bytes(PlanLayout(plan, {.chunk_tokens = chunk_tokens}));
          },
          nb::arg("plan"), nb::arg("chunk_tokens") = 256,
          "Bytes one chunk of `plan` takes in the host tier: its pages, plus the stored object's "
          "headers and checksums (host_bytes = N * this holds N chunks).")
      .def_prop_ro("chunk_bytes", [](const Runtime& r) { return r.rt->layout().chunk_bytes(); })
      .def_prop_ro("chunk_tokens", [](const Runtime& r) { return r.rt->layout().chunk_tokens(); })
      .def_prop_ro("backend", [](const Runtime& r) { return std::string(r.rt->backend().name()); })
      .def_prop_ro("device_chunks", [](const Runtime& r) { return r.rt->device_slots(); })
      .def_prop_ro("host_chunks", [](const Runtime& r) { return r.rt->host_slots(); })
      .def(
          "keys", [](const Runtime& r, const std::vector<uint32_t>& t) { return r.rt->keys(t); },
          nb::arg("tokens"), "The chained key of each whole chunk of `tokens`.")
      .def("store", &store, nb::arg("tokens"), nb::arg("index"), nb::arg("payload"),
           "Stores chunk `index` of `tokens` (chunk_bytes uint8) on the device and host tiers.")
      .def("lookup", &lookup, nb::arg("tokens"),
           "(prefix chunks, prefix tokens, tier of each whole chunk) of the longest cached prefix.")
      .def("load", &load, nb::arg("tokens"), nb::arg("max_chunks") = nb::none(),
           "The longest cached prefix's chunks, each checked (header, checksum) on its way to "
           "the device, as uint8 arrays.")
      .def(
          "evict",
          [](Runtime& r, uint64_t key, std::optional<std::string> tier) {
            if (!tier) return r.rt->evict(key);
            const std::string& t = *tier;
            if (t != "device" && t != "host" && t != "disk") {
              fail(ErrorCode::kInvalidArgument, "tier '{}': expected device, host or disk", t);
            }
            return r.rt->evict_from(key, t == "device" ? Tier::kDevice
                                         : t == "host" ? Tier::kHost
                                                       : Tier::kDisk);
          },
          nb::arg("key"), nb::arg("tier") = nb::none(),
          "Drops a chunk from every tier (or from `tier`); True when it is gone from there.")
      .def_prop_ro("stats", [](const Runtime& r) {
        const RuntimeStats s = r.rt->stats();
        nb::dict d;
        d["stores_ok"] = s.stores_ok;
        d["stores_failed"] = s.stores_failed;
        d["loads_chunks"] = s.loads_chunks;
        d["hits_device"] = s.hits_device;
        d["hits_host"] = s.hits_host;
        d["hits_disk"] = s.hits_disk;
        d["misses"] = s.misses;
        d["refusals"] = s.refusals;
        d["bytes_device_to_host"] = s.bytes_device_to_host;
        d["bytes_host_to_device"] = s.bytes_host_to_device;
        d["bytes_to_disk"] = s.bytes_to_disk;
        d["bytes_from_disk"] = s.bytes_from_disk;
        return d;
      });
}

}  // namespace kvplan::python
