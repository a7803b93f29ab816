// The `kvplan._kvplan` extension module: typed Python objects over kvplan's C++ libraries.
#include "python/bindings.h"

NB_MODULE(_kvplan, m) {
  m.doc() = "kvplan's C++ core: formats, plans, memory estimates, the packed KV cache, tune";
  m.attr("__version__") = KVPLAN_VERSION;
  kvplan::python::bind_errors(m);
  kvplan::python::bind_formats(m);
  kvplan::python::bind_plan(m);
  kvplan::python::bind_tokenizer(m);
  kvplan::python::bind_layer_cache(m);
  kvplan::python::bind_runtime(m);
  kvplan::python::bind_pipeline(m);
}
