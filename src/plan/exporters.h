// Exports of a plan to what serving engines accept today. Engines take one global KV type (or a
// few), so an export says plainly what it keeps of the plan and what it cannot express.
//
//   kvplan::PlanExport e = kvplan::export_llamacpp(plan);
//   e.text;   // "-ctk q8_0 -ctv q4_0 -fa on"
//   e.notes;  // why this pair, and what is lost
#pragma once

#include <string>
#include <vector>

#include "plan/plan.h"

namespace kvplan {

struct PlanExport {
  std::string text;                // what to paste: flags, arguments or a YAML file
  std::vector<std::string> notes;  // what the export keeps, drops or could not express
  bool exact = false;              // true when the export expresses the plan exactly
};

// llama.cpp (-ctk/-ctv): the best measured global pair of llama.cpp cache types within the plan's
// memory (from the plan's baselines), else the largest that is no bigger than the plan.
PlanExport export_llamacpp(const Plan& plan);

// vLLM (--kv-cache-dtype, kv_cache_dtype_skip_layers): expressible only for fp8 / 16-bit layers.
PlanExport export_vllm(const Plan& plan);

// KVTuner's per-layer YAML {layer: {nbits_key, nbits_value}}: int formats only (16 for bf16/f16).
// Throws Error(kUnimplemented) naming the first layer whose formats KVTuner cannot express.
PlanExport export_kvtuner_yaml(const Plan& plan);

}  // namespace kvplan
