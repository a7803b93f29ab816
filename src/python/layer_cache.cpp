// kvplan.LayerCache: one layer of the harness's packed paged KV cache (model/kv_cache.h) for a
// plan's layer — the bytes held are the plan's, KIVI's residual window and sliding windows
// included — so that another engine's attention (kvplan.hf.PlanCache in transformers) reads
// exactly what kvplan's own attention reads.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/kv_cache.h"
#include "plan/plan.h"
#include "python/bindings.h"
#include "python/ndarray_util.h"

namespace nb = nanobind;

namespace kvplan::python {
namespace {

// LayerKvCache holds its pages in a std::vector of unique_ptr, which std::is_copy_constructible
// reports as copyable; behind a unique_ptr nanobind sees a move-only object.
struct LayerCache {
  std::unique_ptr<LayerKvCache> cache;
};

LayerCache make_layer_cache(const Plan& plan, int layer) {
  if (layer < 0 || layer >= static_cast<int>(plan.layers.size())) {
    fail(ErrorCode::kOutOfRange, "layer {}: the plan for {} has layers 0..{}", layer,
         plan.model.name, plan.layers.size() - 1);
  }
  const PlanLayer& l = plan.layers[static_cast<size_t>(layer)];
  const KvLayerGeometry& geometry = plan.model.geometry.layers[static_cast<size_t>(layer)];
  if (l.per_head()) {  // a per-KV-head plan's layer: its heads' pairs
    return {
        std::make_unique<LayerKvCache>(layer, geometry, l.heads, plan.quantization, l.fp8_scales)};
  }
  return {std::make_unique<LayerKvCache>(layer, geometry, /*exact=*/false, l.pair,
                                         plan.quantization, l.fp8_scales)};
}

// Rows of [n, n_kv_heads * head_dim] (or [n, n_kv_heads, head_dim]) for this layer.
size_t checked_rows(const LayerKvCache& c, const CpuArray<float>& a, const char* what) {
  const size_t row = static_cast<size_t>(c.n_kv_heads()) * static_cast<size_t>(c.head_dim());
  size_t per_token = 1;
  for (size_t d = 1; d < a.ndim(); ++d) per_token *= a.shape(d);
  if (a.ndim() < 2 || a.ndim() > 3 || per_token != row ||
      (a.ndim() == 3 && a.shape(1) != static_cast<size_t>(c.n_kv_heads()))) {
    std::string shape;
    for (size_t d = 0; d < a.ndim(); ++d) shape += (d ? ", " : "") + std::to_string(a.shape(d));
    fail(ErrorCode::kInvalidArgument,
         "{}: expected [tokens, {} heads x {} head_dim] float32 rows, got shape [{}]", what,
         c.n_kv_heads(), c.head_dim(), shape);
  }
  return a.shape(0);
}

void append(LayerCache& self, CpuArray<float> keys, CpuArray<float> values) {
  LayerKvCache& c = *self.cache;
  const size_t n = checked_rows(c, keys, "keys");
  if (checked_rows(c, values, "values") != n) {
    fail(ErrorCode::kInvalidArgument, "keys and values: {} and {} tokens, expected the same", n,
         values.shape(0));
  }
  nb::gil_scoped_release unlocked;
  const size_t row = static_cast<size_t>(c.n_kv_heads()) * static_cast<size_t>(c.head_dim());
  c.append(keys.data(), values.data(), n, row);
  c.commit();
}

// Tokens [first, n_tokens) of one side as [n_kv_heads, tokens, head_dim]; `first` defaults to the
// first token still held.
NumpyArray<float> read_side(const LayerCache& self, KvSide side, std::optional<size_t> from) {
  const LayerKvCache& c = *self.cache;
  const size_t first = from.value_or(c.first_held_token());
  if (first < c.first_held_token() || first > c.n_tokens()) {
    fail(ErrorCode::kOutOfRange, "first {}: the layer holds tokens {}..{}", first,
         c.first_held_token(), c.n_tokens());
  }
  const size_t n = c.n_tokens() - first;
  const size_t heads = static_cast<size_t>(c.n_kv_heads());
  const size_t dim = static_cast<size_t>(c.head_dim());
  OwnedArray<float> out({heads, n, dim});
  {
    nb::gil_scoped_release unlocked;
    std::vector<float> scratch(c.read_scratch_floats());
    for (size_t h = 0; h < heads && n > 0; ++h) {
      c.read(side, static_cast<int>(h), first, n, out.data.get() + h * n * dim, scratch);
    }
  }
  return out.release();
}

}  // namespace

void bind_layer_cache(nb::module_& m) {
  nb::class_<LayerCache>(
      m, "LayerCache",
      "One layer's K and V in the plan's packed pages (model/kv_cache.h): appended rows are "
      "packed as the plan says and read back as attention sees them.")
      .def(nb::new_(&make_layer_cache), nb::arg("plan"), nb::arg("layer"))
      .def("append", &append, nb::arg("keys"), nb::arg("values"),
           "Appends tokens' K (after RoPE) and V rows, [tokens, n_kv_heads * head_dim] float32, "
           "and packs those the mode says are due.")
      .def(
          "keys",
          [](const LayerCache& c, std::optional<size_t> first) {
            return read_side(c, KvSide::kKey, first);
          },
          nb::arg("first") = nb::none(),
          "Keys of tokens [first, n_tokens) as attention reads them: [n_kv_heads, tokens, "
          "head_dim] float32 (first: default first_held_token).")
      .def(
          "values",
          [](const LayerCache& c, std::optional<size_t> first) {
            return read_side(c, KvSide::kValue, first);
          },
          nb::arg("first") = nb::none(), "Values of tokens [first, n_tokens), like keys().")
      .def("clear", [](LayerCache& c) { c.cache->clear(); })
      .def_prop_ro("n_tokens", [](const LayerCache& c) { return c.cache->n_tokens(); })
      .def_prop_ro("n_committed", [](const LayerCache& c) { return c.cache->n_committed(); })
      .def_prop_ro(
          "first_held_token", [](const LayerCache& c) { return c.cache->first_held_token(); },
          "Tokens before it were freed (a sliding-window layer frees whole pages).")
      .def_prop_ro(
          "bytes_held", [](const LayerCache& c) { return c.cache->bytes_held(); },
          "Bytes of the pages and the f32 staging rows the layer holds.")
      .def_prop_ro("n_kv_heads", [](const LayerCache& c) { return c.cache->n_kv_heads(); })
      .def_prop_ro("head_dim", [](const LayerCache& c) { return c.cache->head_dim(); });
}

}  // namespace kvplan::python
