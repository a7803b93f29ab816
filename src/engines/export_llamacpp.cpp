// llama.cpp: -ctk/-ctv, one cache type for K and one for V of every layer; the best measured global
// pair within the plan's memory, with the rotation llama.cpp applies by default at head_dim % 64.
// Grammar: docs/engines.md sections 2 and 6.
#include "engines/exporters.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/kv_bytes.h"
#include "plan/layer_ranges.h"

namespace kvplan {
namespace {

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

}  // namespace

// The bytes a uniform engine configuration may take in the plan's stead: the plan's budget when
// the search had one in bytes (the plan may sit a few bytes under it), else the plan's own bytes.
double engine_byte_limit(const Plan& plan) {
  double limit = summarize_plan(plan).bytes_per_token;
  const SearchProvenance& pv = plan.results.provenance;
  if (pv.memory_measure == "bytes_per_token" && pv.budget_value) {
    limit = std::max(limit, *pv.budget_value);
  }
  return limit;
}

// What `-ctk K -ctv V` stores on a llama.cpp that rotates by default: the rotated twins at a
// head_dim it rotates (q4_0_had K and q4_0_had64 V at 256; nullopt where the rotation is not
// kvplan's), the pair itself where nothing is rotated.
std::optional<KvPair> llamacpp_default_storage(const KvPair& pair, int head_dim) {
  const EngineSpec& llama = engine_spec(EngineId::kLlamaCpp);
  const RotationSetting by_default = rotation_settings(llama, head_dim).front();
  const auto stored_as = [&](const Format& f, bool keys) -> std::optional<Format> {
    if (!(keys ? by_default.keys : by_default.values) || f.family() == FormatFamily::kPlain) {
      return f;
    }
    const std::optional<int> span = engine_rotation_span(llama, head_dim, keys);
    return span ? rotated_twin(f, *span) : std::nullopt;
  };
  const std::optional<Format> k = stored_as(pair.key, true), v = stored_as(pair.value, false);
  if (!k || !v || !setting_stores(llama, by_default, head_dim, KvPair{*k, *v})) {
    return std::nullopt;
  }
  return KvPair{*k, *v};
}

PlanExport export_llamacpp(const Plan& plan) {
  const EngineSpec& llama = engine_spec(EngineId::kLlamaCpp);
  const int head_dim = common_head_dim(plan.model.geometry);
  PlanExport e;
  const double plan_bytes = engine_byte_limit(plan);
  // 1. The best measured baseline that llama.cpp can run within the plan's budget.
  std::optional<KvPair> best;
  double best_kl = 0;
  for (const UniformBaseline& b : plan.results.baselines) {
    const KvPair pair = KvPair::parse(b.kv);
    if (!engine_stores(llama, pair, head_dim) || !b.mean_kl) continue;
    const auto bytes = uniform_bytes(plan, pair);
    if (!bytes || *bytes > plan_bytes * (1 + 1e-9)) continue;
    const double kl = *b.mean_kl;
    if (!best || kl < best_kl) {
      best = pair;
      best_kl = kl;
    }
  }
  if (best) {
    e.notes.push_back(fmt::format(
        "{} is the best measured llama.cpp pair within the plan's budget of {:.0f} "
        "bytes per token (mean KL {:.6f}; the plan measured {})",
        best->name(), plan_bytes, best_kl,
        plan.results.quality.mean_kl ? fmt::format("{:.6f}", *plan.results.quality.mean_kl)
                                     : "nothing"));
  } else {
    // 2. Unmeasured: the largest llama.cpp pair that fits, as llama.cpp stores it by default.
    const char* order[] = {"f16/f16",   "q8_0/q8_0", "q8_0/q5_1",    "q8_0/q5_0",
                           "q8_0/q4_1", "q8_0/q4_0", "q5_1/q5_1",    "q5_0/q5_0",
                           "q4_1/q4_1", "q4_0/q4_0", "iq4_nl/iq4_nl"};
    double best_bytes = -1;
    for (const char* name : order) {
      const KvPair pair =
          llamacpp_default_storage(KvPair::parse(name), head_dim).value_or(KvPair::parse(name));
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
  const RotationSetting setting = setting_for(llama, *best, head_dim).value();
  e.text = fmt::format("-ctk {} -ctv {}", engine_cache_type(best->key).name(),
                       engine_cache_type(best->value).name());
  if (best->value.family() == FormatFamily::kGgml) {
    e.text += " -fa on";
    e.notes.push_back("llama.cpp needs flash attention (-fa on) for a quantized V cache");
  }
  if (setting.disabled_by_environment) {
    e.text = "export LLAMA_ATTN_ROT_DISABLE=1\n" + e.text;
    const std::optional<KvPair> by_default = llamacpp_default_storage(*best, head_dim);
    e.notes.push_back(fmt::format(
        "LLAMA_ATTN_ROT_DISABLE=1 in llama.cpp's environment keeps {} unrotated, as measured; "
        "without it llama.cpp (since PR #21038, 2026-04) rotates quantized K and V at head_dim "
        "% 64 == 0 and stores {}",
        best->name(),
        by_default && head_dim != 0 ? by_default->name()
                                    : std::string("a rotated format kvplan does not pack")));
  } else if (setting.keys || setting.values) {
    e.notes.push_back(fmt::format(
        "llama.cpp (since PR #21038, 2026-04) rotates quantized K and V at head_dim % 64 == 0 by "
        "itself: these flags store {}, as measured; a build before that PR, or one run with "
        "LLAMA_ATTN_ROT_DISABLE set, stores {} unrotated",
        best->name(), KvPair{engine_cache_type(best->key), engine_cache_type(best->value)}.name()));
  }
  e.notes.push_back(
      "llama.cpp applies one K type and one V type to every layer: the plan's "
      "per-layer choice is not expressible");
  for (const PlanLayer& l : plan.layers) {
    e.runs.push_back(*best);
    if (l.pair.key != best->key) {
      e.losses.push_back({l.index, "key", l.pair.key.name(), best->key.name(),
                          "llama.cpp applies one -ctk type to every layer"});
    }
    if (l.pair.value != best->value) {
      e.losses.push_back({l.index, "value", l.pair.value.name(), best->value.name(),
                          "llama.cpp applies one -ctv type to every layer"});
    }
  }
  if (plan.quantization.mode != QuantMode::kPerToken) {
    e.losses.push_back({-1, "mode", std::string(quant_mode_name(plan.quantization.mode)),
                        "per-token", "llama.cpp quantizes K and V per token"});
  }
  return e;
}

}  // namespace kvplan
