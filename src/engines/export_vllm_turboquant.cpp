// vLLM TurboQuant's KV cache configuration for a plan: one preset K/V pair for every quantized
// layer (--kv-cache-dtype turboquant_k8v4 | turboquant_4bit_nc | turboquant_k3v4_nc |
// turboquant_3bit_nc) and --kv-cache-dtype-skip-layers, to which vLLM adds the first and last two
// layers itself (docs/engines.md section 2).
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "engines/engine.h"
#include "engines/exporters.h"
#include "formats/format_size.h"
#include "formats/kv_bytes.h"

namespace kvplan {
namespace {

bool sixteen_bit(const Format& f) {
  return f.family() == FormatFamily::kPlain;
}

}  // namespace

// vLLM TurboQuant: one preset for every quantized layer (--kv-cache-dtype turboquant_*), the
// skip list for layers at the model's dtype, to which vLLM itself adds its boundary layers
// (the first and last two, arg_utils.py). Each quantized layer maps to the smallest preset whose
// key and value bits are at least those of the formats TurboQuant would store for the plan's
// (nearest_engine_format); the preset most layers map to is taken (on a tie, the wider).
PlanExport export_vllm_turboquant(const Plan& plan) {
  const EngineSpec& tq = engine_spec(EngineId::kVllmTurboquant);
  const std::vector<int> boundary =
      engine_boundary_layers(tq, static_cast<int>(plan.layers.size()));
  const auto is_boundary = [&](int layer) {
    return std::find(boundary.begin(), boundary.end(), layer) != boundary.end();
  };
  const auto pair_of = [](const EnginePreset& p) { return KvPair::parse(p.pair); };
  // The presets in the registry's order, smallest last; bytes decide "smallest".
  const auto slot_bytes = [](const KvPair& q, int head_dim) {
    return packed_row_bytes(q.key, head_dim, 32) + packed_row_bytes(q.value, head_dim, 32);
  };
  const auto preset_for = [&](const KvPair& want, int head_dim) {
    const EnginePreset* best = nullptr;
    for (const EnginePreset& p : tq.presets) {
      const KvPair q = pair_of(p);
      if (q == want) return &p;
      if (q.key.info().bits < want.key.info().bits || q.value.info().bits < want.value.info().bits)
        continue;
      if (!best || slot_bytes(q, head_dim) < slot_bytes(pair_of(*best), head_dim)) best = &p;
    }
    return best ? best : &tq.presets.front();  // the widest: FP8 keys, 4-bit values
  };

  PlanExport e;
  std::vector<const EnginePreset*> wanted(plan.layers.size(), nullptr);
  std::map<const EnginePreset*, int> votes;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const PlanLayer& l = plan.layers[i];
    if (sixteen_bit(l.pair.key) || sixteen_bit(l.pair.value) || is_boundary(l.index)) {
      continue;
    }
    const int head_dim = plan.model.geometry.layers.at(i).head_dim;
    const std::vector<UniformBaseline>& measured = plan.results.baselines;
    const KvPair mapped{nearest_engine_format(tq, l.pair.key, head_dim, measured),
                        nearest_engine_format(tq, l.pair.value, head_dim, measured)};
    wanted[i] = preset_for(mapped, head_dim);
    ++votes[wanted[i]];
  }
  const EnginePreset* chosen = nullptr;
  for (const EnginePreset& p : tq.presets) {  // widest first: a tie goes to the wider
    const auto it = votes.find(&p);
    if (it != votes.end() && (!chosen || it->second > votes[chosen])) chosen = &p;
  }

  std::vector<int> skip;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const PlanLayer& l = plan.layers[i];
    const KvPair& p = l.pair;
    if (wanted[i] == nullptr) {
      skip.push_back(l.index);
      const bool model_dtype = p.key == p.value && is_model_dtype(p.key);
      e.runs.push_back(model_dtype ? p : KvPair::parse("bf16/bf16"));
      for (const auto& [side, f] : {std::pair{"key", p.key}, std::pair{"value", p.value}}) {
        if (is_model_dtype(f)) continue;
        e.losses.push_back(
            {l.index, side, f.name(), "auto (the model's dtype)",
             is_boundary(l.index)
                 ? fmt::format("vLLM keeps TurboQuant's boundary layers ({}) at the model's dtype",
                               fmt::join(boundary, ", "))
             : sixteen_bit(f) ? "vLLM's auto stores the model's dtype"
                              : "the layer's other side is 16-bit: the layer is skipped"});
      }
      continue;
    }
    const KvPair runs = pair_of(*chosen);
    e.runs.push_back(runs);
    for (const auto& [side, f, to] :
         {std::tuple{"key", p.key, runs.key}, std::tuple{"value", p.value, runs.value}}) {
      if (f == to) continue;
      e.losses.push_back(
          {l.index, side, f.name(), to.name(),
           engine_stores(tq, f)
               ? fmt::format("vLLM takes one TurboQuant preset for every layer: {}", chosen->name)
               : fmt::format("{} is not a TurboQuant format; the preset is {}", f.name(),
                             chosen->name)});
    }
  }
  if (chosen == nullptr) {
    e.text = "--kv-cache-dtype auto";
    e.notes.push_back(
        "no layer of the plan is quantized outside TurboQuant's boundary layers: "
        "vLLM's auto everywhere");
    return e;
  }
  e.text = fmt::format("--kv-cache-dtype {} --kv-cache-dtype-skip-layers {}", chosen->name,
                       fmt::join(skip, " "));
  e.notes.push_back(fmt::format(
      "vLLM adds layers {} (TurboQuant's boundary layers) to the skip list itself; they are "
      "listed here too",
      fmt::join(boundary, ", ")));
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const size_t slot = slot_bytes(pair_of(*chosen), plan.model.geometry.layers.at(i).head_dim);
    if (wanted[i] != nullptr && slot % 2 != 0) {
      e.notes.push_back(fmt::format(
          "vLLM pads each (token, head) slot of {} to an even {} bytes: one byte per KV head of "
          "each quantized layer that kvplan's estimate leaves out",
          chosen->name, slot + 1));
      break;
    }
  }
  try {
    const double planned = summarize_plan(plan).bytes_per_token;
    const double stored = kv_bytes_per_token(plan.model.geometry, e.runs, plan.quantization);
    if (stored != planned) {
      e.notes.push_back(fmt::format(
          "vLLM stores {:.0f} bytes per token with this configuration, the plan {:.0f} ({:+.1f}%)",
          stored, planned, 100.0 * (stored - planned) / planned));
    }
  } catch (const Error&) {
    // A geometry the sizes cannot be computed for has no comparison to offer.
  }
  return e;
}

}  // namespace kvplan
