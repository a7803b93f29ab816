// The export of a plan to an engine: the refusal when the engine stores none of the plan's formats,
// then that engine's exporter; and the losses listed in words.
#include "engines/exporters.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "plan/layer_ranges.h"

namespace kvplan {

std::vector<std::string> describe_losses(const std::vector<ExportLoss>& losses) {
  // Group by everything but the layer, in order of first appearance.
  std::vector<std::pair<ExportLoss, std::vector<int>>> groups;
  for (const ExportLoss& loss : losses) {
    ExportLoss key = loss;
    key.layer = -1;
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {}});
      it = std::prev(groups.end());
    }
    if (loss.layer >= 0) it->second.push_back(loss.layer);
  }
  std::vector<std::string> lines;
  for (auto& [loss, layers] : groups) {
    const std::string where = layer_ranges(layers);
    const std::string scope = layers.empty()       ? "every layer"
                              : layers.size() == 1 ? "layer " + where
                                                   : "layers " + where;
    lines.push_back(fmt::format("{} {}: {} -> {} ({})", scope, loss.field, loss.planned,
                                loss.exported, loss.reason));
  }
  return lines;
}

namespace {

// What an engine of one format per layer loses on a per-KV-head plan's layers: each side whose
// heads differ runs its layer's widest head format (PlanLayer::pair) on every head.
std::vector<ExportLoss> per_head_losses(const Plan& plan, const EngineSpec& engine) {
  std::vector<ExportLoss> losses;
  for (const PlanLayer& l : plan.layers) {
    for (const bool keys : {true, false}) {
      std::vector<std::string> names;
      bool differ = false;
      for (const KvPair& p : l.heads) {
        const Format f = keys ? p.key : p.value;
        names.push_back(f.name());
        differ = differ || f != (keys ? l.heads.front().key : l.heads.front().value);
      }
      if (!differ) continue;
      losses.push_back({l.index, keys ? "key" : "value",
                        fmt::format("per KV head {}", fmt::join(names, ",")),
                        (keys ? l.pair.key : l.pair.value).name(),
                        fmt::format("{} takes one format per layer: every head gets the widest "
                                    "of its heads' (more memory, no head less precise)",
                                    engine.display)});
    }
  }
  return losses;
}

}  // namespace

PlanExport export_plan(const Plan& plan, EngineId id) {
  const EngineSpec& engine = engine_spec(id);
  require_packable(engine);
  if (id == EngineId::kKvplan) {
    fail(ErrorCode::kInvalidArgument,
         "--to kvplan: the plan is kvplan's own format already; export to one of {}",
         engine_names());
  }
  int stored = 0;
  std::vector<Format> lacking;  // in order of first appearance
  for (const PlanLayer& l : plan.layers) {
    for (const Format& f : {l.pair.key, l.pair.value}) {
      if (engine_stores(engine, f)) {
        ++stored;
      } else if (std::find(lacking.begin(), lacking.end(), f) == lacking.end()) {
        lacking.push_back(f);
      }
    }
  }
  if (stored == 0) {
    fail(ErrorCode::kInvalidArgument,
         "{} cannot express any layer of this plan: it does not store {} (its formats: {}); "
         "search a plan it can run: kvplan search --engine {} (or kvplan tune --engine {})",
         engine.display, format_list(lacking), engine_format_list(engine), engine.name,
         engine.name);
  }
  // One exporter per engine (export_<engine>.cpp).
  using Exporter = PlanExport (*)(const Plan&);
  static constexpr std::pair<EngineId, Exporter> kExporters[] = {
      {EngineId::kLlamaCpp, export_llamacpp}, {EngineId::kIkLlamaCpp, export_ik_llamacpp},
      {EngineId::kVllm, export_vllm},         {EngineId::kVllmTurboquant, export_vllm_turboquant},
      {EngineId::kTrtllm, export_trtllm},     {EngineId::kModelopt, export_modelopt},
      {EngineId::kHf, export_kvtuner_yaml}};
  for (const auto& [engine_id, exporter] : kExporters) {
    if (engine_id != id) continue;
    PlanExport e = exporter(plan);
    const std::vector<ExportLoss> heads = per_head_losses(plan, engine);
    e.losses.insert(e.losses.begin(), heads.begin(), heads.end());
    return e;
  }
  fail(ErrorCode::kInternal, "no exporter for {}", engine.name);
}

}  // namespace kvplan
