// kvplan.Format, formats(), pack(), unpack(): the format registry and the CPU codecs, on numpy (or
// any DLPack) arrays. pack/unpack work on the last axis: a [..., row_len] float32 array becomes
// [..., row_bytes] uint8 rows of the format, the bytes the runtime stores, and back.
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "engines/engine.h"
#include "formats/format.h"
#include "formats/format_size.h"
#include "formats/pack.h"
#include "python/bindings.h"
#include "python/ndarray_util.h"

namespace nb = nanobind;

namespace kvplan::python {
namespace {

std::vector<std::string> engines_storing(Format f) {
  std::vector<std::string> names;
  for (const EngineSpec& e : all_engines()) {
    if (e.id != EngineId::kKvplan && engine_stores(e, f)) names.emplace_back(e.name);
  }
  return names;
}

// The leading dimensions of `shape` (rows) and its last one (the row), refusing a scalar.
size_t leading_rows(const nb::ndarray<>& a, const char* what) {
  if (a.ndim() == 0)
    fail(ErrorCode::kInvalidArgument, "{}: expected an array of rows, got a scalar", what);
  size_t rows = 1;
  for (size_t d = 0; d + 1 < a.ndim(); ++d) rows *= a.shape(d);
  return rows;
}

std::vector<size_t> shape_with_last(const nb::ndarray<>& a, size_t last) {
  std::vector<size_t> shape(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) shape[d] = a.shape(d);
  shape.back() = last;
  return shape;
}

PackOptions pack_options(Format f, size_t group_size, float fp8_scale) {
  if (group_size == 0) fail(ErrorCode::kInvalidArgument, "group_size: expected > 0, got 0");
  if (!(fp8_scale > 0.0f)) {
    fail(ErrorCode::kInvalidArgument, "fp8_scale: expected > 0, got {}", fp8_scale);
  }
  if (f.is_slot()) {
    fail(ErrorCode::kInvalidArgument, "{}: a slot holds opaque bytes and has no codec", f.name());
  }
  return {.group_size = group_size, .fp8_scale = fp8_scale};
}

NumpyArray<uint8_t> pack(const std::string& format, CpuArray<float> values, size_t group_size,
                         float fp8_scale) {
  const Format f = Format::parse(format);
  const PackOptions opt = pack_options(f, group_size, fp8_scale);
  const nb::ndarray<> view(values);
  const size_t rows = leading_rows(view, "pack");
  const size_t row_len = values.shape(values.ndim() - 1);
  const size_t row_bytes = packed_row_bytes(f, row_len, group_size);
  OwnedArray<uint8_t> out(shape_with_last(view, row_bytes));
  {
    nb::gil_scoped_release unlocked;
    if (rows > 0) pack_rows(f, values.data(), rows, row_len, out.data.get(), opt);
  }
  return out.release();
}

NumpyArray<float> unpack(const std::string& format, CpuArray<uint8_t> packed, size_t row_len,
                         size_t group_size, float fp8_scale) {
  const Format f = Format::parse(format);
  const PackOptions opt = pack_options(f, group_size, fp8_scale);
  const nb::ndarray<> view(packed);
  const size_t rows = leading_rows(view, "unpack");
  const size_t row_bytes = packed_row_bytes(f, row_len, group_size);
  if (packed.shape(packed.ndim() - 1) != row_bytes) {
    fail(ErrorCode::kInvalidArgument,
         "unpack: {} rows of {} values take {} bytes, the array's last axis has {}", f.name(),
         row_len, row_bytes, packed.shape(packed.ndim() - 1));
  }
  OwnedArray<float> out(shape_with_last(view, row_len));
  {
    nb::gil_scoped_release unlocked;
    if (rows > 0) unpack_rows(f, packed.data(), rows, row_len, out.data.get(), opt);
  }
  return out.release();
}

}  // namespace

void bind_formats(nb::module_& m) {
  nb::class_<Format>(m, "Format", "One KV format of the registry (`kvplan formats`).")
      .def_static("parse", &Format::parse, nb::arg("name"),
                  "The format named `name` (catalogue names and aliases such as fp16, fp8).")
      .def_prop_ro("name", &Format::name)
      .def_prop_ro("id", [](const Format& f) { return static_cast<int>(f.id()); })
      .def_prop_ro("version", [](const Format& f) { return static_cast<int>(f.info().version); })
      .def_prop_ro(
          "nominal_bits", [](const Format& f) { return f.info().bits; },
          "Bits per value before scales and block overhead.")
      .def_prop_ro("meaning", [](const Format& f) { return std::string(f.info().meaning); })
      .def_prop_ro("searched_by_default",
                   [](const Format& f) { return f.info().default_candidate; })
      .def_prop_ro("engines", &engines_storing, "Serving engines that store this format.")
      .def(
          "row_bytes",
          [](const Format& f, size_t n_values, size_t group_size) {
            return packed_row_bytes(f, n_values, group_size);
          },
          nb::arg("n_values"), nb::arg("group_size") = 32,
          "Bytes of one packed row of `n_values` values (scales included).")
      .def(
          "effective_bits",
          [](const Format& f, size_t n_values, size_t group_size) {
            return effective_bits(f, n_values, group_size);
          },
          nb::arg("n_values"), nb::arg("group_size") = 32)
      .def("__eq__", [](const Format& a, const Format& b) { return a == b; })
      .def("__hash__", [](const Format& f) { return static_cast<int>(f.id()); })
      .def("__repr__", [](const Format& f) { return "kvplan.Format('" + f.name() + "')"; });

  m.def(
      "formats",
      [] {
        std::vector<Format> all;
        for (const KvFormatTraits& info : format_table()) all.emplace_back(info.id);
        return all;
      },
      "Every format of the registry, in registry order.");
  m.def("pack", &pack, nb::arg("format"), nb::arg("values"), nb::arg("group_size") = 32,
        nb::arg("fp8_scale") = 1.0f,
        "Packs the last axis of a float32 array [..., row_len] into uint8 rows [..., row_bytes].");
  m.def("unpack", &unpack, nb::arg("format"), nb::arg("packed"), nb::arg("row_len"),
        nb::arg("group_size") = 32, nb::arg("fp8_scale") = 1.0f,
        "Unpacks uint8 rows [..., row_bytes] into float32 [..., row_len].");
}

}  // namespace kvplan::python
