// The pieces of the `kvplan._kvplan` extension module (nanobind), one file per concept; module.cpp
// calls each in order. The Python package (python/kvplan) wraps them with docstrings and defaults.
#pragma once

#include <nanobind/nanobind.h>

namespace kvplan::python {

// kvplan.Error (and kvplan.InputError, a ValueError, for bad input): kvplan::Error crossing into
// Python keeps its one-line message and its code.
void bind_errors(nanobind::module_& m);
// kvplan.Format, formats(), pack(), unpack().
void bind_formats(nanobind::module_& m);
// kvplan.Plan, its layers and settings; estimate().
void bind_plan(nanobind::module_& m);
// kvplan.Tokenizer: a model's tokenizer as the harness runs it.
void bind_tokenizer(nanobind::module_& m);
// kvplan.LayerCache: one layer's packed paged KV (model/kv_cache.h), for kvplan.hf.PlanCache.
void bind_layer_cache(nanobind::module_& m);
// kvplan.Runtime: the serving runtime's tiers (runtime/offload_runtime.h).
void bind_runtime(nanobind::module_& m);
// kvplan.Profile, profile(), search(), tune(): the pipeline with the CLI's flags.
void bind_pipeline(nanobind::module_& m);

}  // namespace kvplan::python
