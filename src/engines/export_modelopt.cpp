// ModelOpt's per-layer KV config (hf_quant_config.json, kv_cache_schema_version 1), as vLLM's
// RFC #57445 reads it. Grammar: docs/engines.md section 8.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engines/export_util.h"

namespace kvplan {

PlanExport export_modelopt(const Plan& plan) {
  PlanExport e;
  const std::vector<Format> dtypes =
      one_dtype_per_layer(e, engine_spec(EngineId::kModelopt), plan,
                          "ModelOpt's per-layer KV config gives a layer one algorithm for K and V");
  std::vector<std::pair<int, std::string>> layers;  // layer, quant_algo, in plan order
  std::map<std::string, int> algos;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    if (is_model_dtype(dtypes[i])) continue;  // a layer not listed is not KV-quantized
    layers.push_back({plan.layers[i].index, spelled(kEngineModelopt, dtypes[i])});
    ++algos[layers.back().second];
  }
  std::string body;
  for (const auto& [index, algo] : layers) {
    body += fmt::format("{}      \"model.layers.{}.self_attn\": {{\"quant_algo\": \"{}\"}}",
                        body.empty() ? "" : ",\n", index, algo);
  }
  const std::string kv_algo = algos.size() == 1 && layers.size() == plan.layers.size()
                                  ? algos.begin()->first
                                  : (layers.empty() ? "null" : "MIXED_PRECISION");
  e.text = fmt::format(
      "{{\n  \"producer\": {{\"name\": \"kvplan\", \"version\": \"{}\"}},\n"
      "  \"quantization\": {{\n"
      "    \"quant_algo\": null,\n"
      "    \"kv_cache_quant_algo\": {},\n"
      "    \"kv_cache_schema_version\": 1,\n"
      "    \"kv_cache_quantized_layers\": {{\n{}\n    }}\n  }}\n}}\n",
      plan.tool_version, kv_algo == "null" ? kv_algo : "\"" + kv_algo + "\"", body);
  e.notes.push_back(
      "hf_quant_config.json as ModelOpt exports a per-layer KV config (kv_cache_quantized_layers, "
      "schema 1), the form vLLM's RFC #57445 reads with --kv-cache-dtype auto; layers not "
      "listed keep the model's dtype. Merge it into the checkpoint's own quantization section, "
      "with the checkpoint's k_scale/v_scale per layer");
  return e;
}

}  // namespace kvplan
