#include "plan/exporters.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/memory_estimate.h"

namespace kvplan {
namespace {

// The KV cache types llama.cpp's -ctk/-ctv accept.
bool llamacpp_type(const Format& f) {
  switch (f.id()) {
    case FormatId::kF32:
    case FormatId::kF16:
    case FormatId::kBF16:
    case FormatId::kQ8_0:
    case FormatId::kQ4_0:
    case FormatId::kQ4_1:
    case FormatId::kQ5_0:
    case FormatId::kQ5_1:
    case FormatId::kIq4Nl:
      return true;
    default:
      return false;
  }
}

std::optional<double> uniform_bytes(const Plan& plan, const KvPair& pair) {
  QuantSettings s = plan.quantization;
  s.mode = QuantMode::kPerToken;  // llama.cpp and vLLM quantize per token
  try {
    return kv_bytes_per_token(plan.model.geometry, std::vector<KvPair>(plan.layers.size(), pair),
                              s);
  } catch (const Error&) {
    return std::nullopt;
  }
}

int int_bits(const Format& f) {
  if (f.family() == FormatFamily::kUniformInt) return f.info().bits;
  switch (f.id()) {
    case FormatId::kBF16:
    case FormatId::kF16:
      return 16;
    default:
      return 0;
  }
}

}  // namespace

// The bytes a uniform engine configuration may take in the plan's stead: the plan's budget when
// the search had one in bytes (the plan may sit a few bytes under it), else the plan's own bytes.
double engine_byte_limit(const Plan& plan) {
  double limit = summarize_plan(plan).bytes_per_token;
  const nlohmann::json& pv = plan.provenance;
  if (pv.is_object() && pv.value("memory_measure", std::string()) == "bytes_per_token" &&
      pv.contains("budget_value") && pv["budget_value"].is_number()) {
    limit = std::max(limit, pv["budget_value"].get<double>());
  }
  return limit;
}

PlanExport export_llamacpp(const Plan& plan) {
  PlanExport e;
  const double plan_bytes = engine_byte_limit(plan);
  // 1. The best measured baseline that llama.cpp can run within the plan's budget.
  std::optional<KvPair> best;
  double best_kl = 0;
  for (const auto& b : plan.baselines) {
    const KvPair pair = KvPair::parse(b.value("kv", std::string()));
    if (!llamacpp_type(pair.key) || !llamacpp_type(pair.value) || !b.contains("mean_kl")) continue;
    const auto bytes = uniform_bytes(plan, pair);
    if (!bytes || *bytes > plan_bytes * (1 + 1e-9)) continue;
    const double kl = b["mean_kl"].get<double>();
    if (!best || kl < best_kl) {
      best = pair;
      best_kl = kl;
    }
  }
  if (best) {
    e.notes.push_back(
        fmt::format("{} is the best measured llama.cpp pair within the plan's budget of {:.0f} "
                    "bytes per token (mean KL {:.6f}; the plan measured {})",
                    best->name(), plan_bytes, best_kl,
                    plan.quality.contains("mean_kl")
                        ? fmt::format("{:.6f}", plan.quality["mean_kl"].get<double>())
                        : "nothing"));
  } else {
    // 2. Unmeasured: the largest llama.cpp pair that fits.
    const char* order[] = {"f16/f16",   "q8_0/q8_0", "q8_0/q5_1",    "q8_0/q5_0",
                           "q8_0/q4_1", "q8_0/q4_0", "q5_1/q5_1",    "q5_0/q5_0",
                           "q4_1/q4_1", "q4_0/q4_0", "iq4_nl/iq4_nl"};
    double best_bytes = -1;
    for (const char* name : order) {
      const KvPair pair = KvPair::parse(name);
      const auto bytes = uniform_bytes(plan, pair);
      if (bytes && *bytes <= plan_bytes * (1 + 1e-9) && *bytes > best_bytes) {
        best = pair;
        best_bytes = *bytes;
      }
    }
    if (!best) {
      fail(ErrorCode::kUnimplemented,
           "no llama.cpp KV cache type fits this plan (its {:.0f} bytes per token are below every "
           "llama.cpp pair, or head_dim {} is not a multiple of 32)",
           plan_bytes, plan.model.geometry.layers.front().head_dim);
    }
    e.notes.push_back(
        fmt::format("{} is the largest llama.cpp pair within the plan's budget of {:.0f} bytes "
                    "per token ({:.0f}); not measured on the model",
                    best->name(), plan_bytes, best_bytes));
  }
  e.text = fmt::format("-ctk {} -ctv {}", best->key.name(), best->value.name());
  if (best->value.family() == FormatFamily::kGgmlBlock) {
    e.text += " -fa on";
    e.notes.push_back("llama.cpp needs flash attention (-fa on) for a quantized V cache");
  }
  e.notes.push_back(
      "llama.cpp applies one K type and one V type to every layer: the plan's "
      "per-layer choice is not expressible");
  return e;
}

PlanExport export_vllm(const Plan& plan) {
  PlanExport e;
  std::vector<int> skip;  // layers kept at the model dtype
  bool any_fp8 = false, inexpressible = false;
  std::string fp8_name = "fp8_e4m3";
  for (const PlanLayer& l : plan.layers) {
    const auto bits = [](const Format& f) { return f.nominal_bits(64); };
    const bool k16 = bits(l.pair.key) >= 16, v16 = bits(l.pair.value) >= 16;
    if (k16 && v16) {
      skip.push_back(l.index);
    } else if (l.pair.key.family() == FormatFamily::kFp8 && l.pair.key == l.pair.value) {
      any_fp8 = true;
      fp8_name = l.pair.key.name();
    } else {
      inexpressible = true;
    }
  }
  if (inexpressible) {
    e.notes.push_back(
        "vLLM's KV cache dtypes are auto (16-bit) and fp8 (e4m3/e5m2): this plan's sub-8-bit or "
        "integer formats cannot be expressed; below is the nearest vLLM configuration (fp8 for "
        "every quantized layer), which uses more memory than the plan");
    any_fp8 = true;
  }
  if (!any_fp8) {
    e.text = "--kv-cache-dtype auto";
    e.exact = true;
    e.notes.push_back("every layer of the plan is 16-bit");
    return e;
  }
  e.text = "--kv-cache-dtype " + fp8_name;
  if (!skip.empty()) {
    std::string list;
    for (int l : skip) list += (list.empty() ? "" : ",") + std::to_string(l);
    e.text += " --kv-cache-dtype-skip-layers " + list;
    e.notes.push_back("layers kept at the model dtype (kv_cache_dtype_skip_layers): " + list +
                      "; check that your vLLM version supports per-layer skipping");
  }
  e.exact = !inexpressible;
  return e;
}

PlanExport export_kvtuner_yaml(const Plan& plan) {
  PlanExport e;
  e.exact = true;
  e.text =
      fmt::format("# KVTuner layer-wise precision for {} ({} layers), generated by kvplan {}\n",
                  plan.model.name, plan.layers.size(), plan.tool_version);
  for (const PlanLayer& l : plan.layers) {
    const int kb = int_bits(l.pair.key), vb = int_bits(l.pair.value);
    if (kb == 0 || vb == 0) {
      fail(ErrorCode::kUnimplemented,
           "layer {}: {} cannot be written as KVTuner nbits (it takes int8/int4/int2 or 16-bit "
           "formats only)",
           l.index, l.pair.name());
    }
    e.text += fmt::format("{}:\n  nbits_key: {}\n  nbits_value: {}\n", l.index, kb, vb);
  }
  e.notes.push_back(fmt::format("KVTuner quantizes in '{}' mode with group size {}, as the plan",
                                quant_mode_name(plan.quantization.mode),
                                plan.quantization.group_size));
  return e;
}

}  // namespace kvplan
