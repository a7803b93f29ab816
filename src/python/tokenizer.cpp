// kvplan.Tokenizer: the model's own tokenizer as kvplan runs it (a GGUF's vocabulary or an HF
// directory's tokenizer.json), so that Python compares engines on the very tokens kvplan scores.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <vector>

#include "model/load_tokenizer.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace kvplan::python {

void bind_tokenizer(nb::module_& m) {
  nb::class_<Tokenizer>(m, "Tokenizer", "A model's tokenizer, as kvplan's harness runs it.")
      .def_static(
          "load",
          [](const std::filesystem::path& model) { return load_model_tokenizer(model).release(); },
          nb::arg("model"), nb::rv_policy::take_ownership,
          "The tokenizer of a .gguf file or an HF model directory.")
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& text, bool add_bos) {
            return t.encode(text, {.add_bos = add_bos});
          },
          nb::arg("text"), nb::arg("add_bos") = true)
      .def("decode", &Tokenizer::decode, nb::arg("ids"))
      .def_prop_ro("bos_id", &Tokenizer::bos_id)
      .def_prop_ro("eos_id", &Tokenizer::eos_id)
      .def_prop_ro("vocab_size", &Tokenizer::vocab_size);
}

}  // namespace kvplan::python
