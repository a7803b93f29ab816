// vLLM's KV cache configuration for a plan. vLLM takes one --kv-cache-dtype for K and V of every
// layer ("auto" = the model's dtype, "fp8_e4m3", "fp8_e5m2", ...) and a list of layers kept at the
// model's dtype (--kv-cache-dtype-skip-layers 0 1 23, vLLM docs "Quantized KV Cache").
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "engines/engine.h"
#include "engines/exporters.h"
#include "formats/kv_bytes.h"

namespace kvplan {
namespace {

bool is_16_bit_or_wider(const Format& f) {
  return f.family() == FormatFamily::kPlain;
}

std::string layer_list(const std::vector<int>& layers, const char* separator) {
  std::string list;
  for (int l : layers) list += (list.empty() ? "" : separator) + std::to_string(l);
  return list;
}

}  // namespace

PlanExport export_vllm(const Plan& plan) {
  PlanExport e;
  const EngineSpec& vllm = engine_spec(EngineId::kVllm);
  // A layer is one dtype for K and V: a layer with a 16-bit side is skipped whole (kept at the
  // model's dtype) rather than quantizing the side the search left unquantized.
  std::vector<bool> skipped;
  std::map<FormatId, int> sides;  // vLLM's quantized dtypes among the quantized layers' sides
  for (const PlanLayer& l : plan.layers) {
    skipped.push_back(is_16_bit_or_wider(l.pair.key) || is_16_bit_or_wider(l.pair.value));
    if (skipped.back()) continue;
    for (const Format& f : {l.pair.key, l.pair.value}) {
      if (engine_stores(vllm, f)) ++sides[f.id()];
    }
  }
  // One dtype for every quantized layer: the one most of the plan's quantized sides use (the
  // first in catalogue order on a tie, so fp8_e4m3, vLLM's "fp8", before fp8_e5m2); without any,
  // fp8_e4m3.
  Format dtype(FormatId::kFp8E4M3);
  int most = 0;
  for (const Format& f : engine_formats(vllm)) {
    const auto it = sides.find(f.id());
    if (it != sides.end() && it->second > most) dtype = f, most = it->second;
  }
  std::string counts;
  for (const auto& [id, n] : sides) {
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, Format(id).name());
  }
  const std::string dtype_reason = fmt::format(
      "vLLM takes one dtype for every quantized layer; the plan's quantized layers hold {} K/V "
      "sides",
      counts.empty() ? "no vLLM" : counts);

  std::vector<int> skip;
  bool any_quantized = false, any_other = false;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const PlanLayer& l = plan.layers[i];
    const KvPair& p = l.pair;
    if (skipped[i]) {
      skip.push_back(l.index);
      // The model's dtype: the plan's own when both sides are one 16-bit format, else bf16.
      const bool model_dtype = p.key == p.value && is_model_dtype(p.key);
      e.runs.push_back(model_dtype ? p : KvPair::parse("bf16/bf16"));
      for (const auto& [side, f] : {std::pair{"key", p.key}, std::pair{"value", p.value}}) {
        if (is_model_dtype(f)) continue;
        e.losses.push_back({l.index, side, f.name(), "auto (the model's dtype)",
                            is_16_bit_or_wider(f)
                                ? "vLLM's auto stores the model's dtype"
                                : "vLLM takes one dtype for K and V of a layer and the "
                                  "layer's other side is 16-bit"});
      }
      continue;
    }
    any_quantized = true;
    e.runs.push_back(KvPair::uniform(dtype));
    for (const auto& [side, f, scales] : {std::tuple{"key", p.key, &l.fp8_scales.key},
                                          std::tuple{"value", p.value, &l.fp8_scales.value}}) {
      if (f.has_tensor_scale() && !scales->empty()) {
        e.losses.push_back(
            {l.index, fmt::format("{} {} scales", side, f.name()),
             fmt::format("{} calibrated per-KV-head scales", scales->size()),
             "the checkpoint's scale (1.0 when it has none)",
             "vLLM reads K/V scales from the model checkpoint (per tensor, or per KV head with "
             "llm-compressor); its flags cannot carry the plan's"});
      }
      if (f == dtype) continue;
      if (engine_stores(vllm, f)) {
        e.losses.push_back({l.index, side, f.name(), dtype.name(), dtype_reason});
      } else {
        any_other = true;
        e.losses.push_back(
            {l.index, side, f.name(), dtype.name(), f.name() + " is not a vLLM KV cache dtype"});
      }
    }
  }
  if (any_other) {
    e.notes.push_back("vLLM's KV cache dtypes kvplan packs are auto (the model's 16-bit dtype), " +
                      engine_format_list(vllm) +
                      ": this plan's other formats cannot be expressed; below is the nearest vLLM "
                      "configuration (every loss is listed)");
  }
  try {
    QuantSettings per_token = plan.quantization;
    per_token.mode = QuantMode::kPerToken;
    const double planned = summarize_plan(plan).bytes_per_token;
    const double stored = kv_bytes_per_token(plan.model.geometry, e.runs, per_token);
    if (stored != planned) {
      e.notes.push_back(fmt::format(
          "vLLM stores {:.0f} bytes per token with this configuration, the plan {:.0f} ({:+.1f}%)",
          stored, planned, 100.0 * (stored - planned) / planned));
    }
  } catch (const Error&) {
    // A geometry the sizes cannot be computed for has no comparison to offer.
  }
  if (!any_quantized) {
    e.text = "--kv-cache-dtype auto";
    e.notes.push_back("every layer of the plan keeps a 16-bit side: vLLM's auto everywhere");
    return e;
  }
  e.text = "--kv-cache-dtype " + dtype.name();
  if (dtype.has_tensor_scale()) {
    e.notes.push_back(
        "vLLM reads K/V scales from the checkpoint (1.0 without calibrated scales; see "
        "--calculate-kv-scales)");
  }
  if (!skip.empty()) {
    e.text += " --kv-cache-dtype-skip-layers " + layer_list(skip, " ");
    e.notes.push_back(
        "layers kept at the model's dtype (kv_cache_dtype_skip_layers): " + layer_list(skip, ", ") +
        "; check that your vLLM version has --kv-cache-dtype-skip-layers");
  }
  return e;
}

}  // namespace kvplan
