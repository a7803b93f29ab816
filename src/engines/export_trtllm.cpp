// TensorRT-LLM: kv_cache_config.dtype as layer ranges ("0-3:fp8,4-29:nvfp4", PR #13695) in a YAML
// file for --extra_llm_api_options. Grammar: docs/engines.md section 7.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engines/export_util.h"
#include "plan/layer_ranges.h"

namespace kvplan {

PlanExport export_trtllm(const Plan& plan) {
  PlanExport e;
  const std::vector<Format> dtypes =
      one_dtype_per_layer(e, engine_spec(EngineId::kTrtllm), plan,
                          "TensorRT-LLM stores one dtype for K and V of a layer: the wider side's");
  // Runs of consecutive layers alike, "first-last:dtype" each.
  std::string ranges;
  for (size_t i = 0, start = 0; i < plan.layers.size(); ++i) {
    const bool run_ends = i + 1 == plan.layers.size() || dtypes[i + 1] != dtypes[i] ||
                          plan.layers[i + 1].index != plan.layers[i].index + 1;
    if (!run_ends) continue;
    ranges += fmt::format("{}{}-{}:{}", ranges.empty() ? "" : ",", plan.layers[start].index,
                          plan.layers[i].index, spelled(kEngineTrtllm, dtypes[i]));
    start = i + 1;
  }
  e.text = fmt::format(
      "# TensorRT-LLM LLM API options (trtllm-serve --extra_llm_api_options <this file>)\n"
      "kv_cache_config:\n  dtype: \"{}\"\n",
      ranges);
  e.notes.push_back(
      "per-layer KvCacheConfig.dtype ranges are TensorRT-LLM PR #13695 (open when this was "
      "written); released versions take one dtype: auto, fp8 or nvfp4");
  e.notes.push_back(
      "16-bit layers are written with TensorRT-LLM's dtype names (float16, bfloat16); the PR "
      "lists FP16 and BF16 among per-layer dtypes without its spelling in the stored sources");
  return e;
}

}  // namespace kvplan
