#include "engines/export_util.h"

#include <limits>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format_size.h"

namespace kvplan {
namespace {

// The one dtype a layer takes on an engine that stores one for K and V: its wider side's, mapped
// to the engine's formats.
Format layer_dtype(const EngineSpec& engine, const KvPair& p, int head_dim,
                   const std::vector<UniformBaseline>& measured) {
  const Format k = nearest_engine_format(engine, p.key, head_dim, measured),
               v = nearest_engine_format(engine, p.value, head_dim, measured);
  return k.info().bits >= v.info().bits ? k : v;
}

bool packs_row(const Format& f, int head_dim) {
  try {
    (void)packed_row_bytes(f, static_cast<size_t>(head_dim), static_cast<size_t>(head_dim));
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

void note_side_loss(PlanExport& e, const EngineSpec& engine, int layer, const char* side,
                    const Format& planned, const Format& exported, const char* why_same) {
  if (planned == exported) return;
  e.losses.push_back({layer, side, planned.name(), exported.name(),
                      engine_stores(engine, planned)
                          ? std::string(why_same)
                          : fmt::format("{} does not store {} (its formats: {})", engine.display,
                                        planned.name(), engine_format_list(engine))});
}

// Each layer's one dtype for an engine that stores one per layer (the wider side's, mapped to
// the engine's formats), with the pairs it runs and every side that changes.
std::vector<Format> one_dtype_per_layer(PlanExport& e, const EngineSpec& engine, const Plan& plan,
                                        const char* why_same) {
  std::vector<Format> dtypes;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const PlanLayer& l = plan.layers[i];
    const Format d = layer_dtype(engine, l.pair, plan.model.geometry.layers.at(i).head_dim,
                                 plan.results.baselines);
    e.runs.push_back(KvPair::uniform(d));
    note_side_loss(e, engine, l.index, "key", l.pair.key, d, why_same);
    note_side_loss(e, engine, l.index, "value", l.pair.value, d, why_same);
    dtypes.push_back(d);
  }
  return dtypes;
}

// An engine's name of a dtype it stores (formats/kv_format_table.h, KVPLAN_ENGINE_SPELLINGS).
std::string spelled(uint32_t engine, const Format& f) {
  const char* name = f.is_slot() ? nullptr : engine_spelling(engine, f.id());
  if (name == nullptr) fail(ErrorCode::kInternal, "{} has no name in this engine", f.name());
  return name;
}

Format nearest_engine_format(const EngineSpec& engine, const Format& f, int head_dim,
                             const std::vector<UniformBaseline>& measured) {
  return nearest_stored_format(engine, f, head_dim, measured,
                               [&](const Format& c) { return engine_stores(engine, c); });
}

Format nearest_stored_format(const EngineSpec& engine, const Format& f, int head_dim,
                             const std::vector<UniformBaseline>& measured,
                             const std::function<bool(const Format&)>& stored) {
  if (stored(f)) return f;
  // Rank: the fewest bits at or above the plan's (else the most there are), the plan's family,
  // the lower mean KL the plan measured for the format as a uniform pair, catalogue order.
  const auto kl_of = [&](const Format& c) {
    const std::string uniform = KvPair::uniform(c).name();
    for (const UniformBaseline& b : measured) {
      if (b.mean_kl && KvPair::parse(b.kv).name() == uniform) return *b.mean_kl;
    }
    return std::numeric_limits<double>::infinity();
  };
  const auto rank = [&](const Format& c) {
    const int bits = c.info().bits, want = f.info().bits;
    return std::tuple{bits >= want ? 0 : 1, bits >= want ? bits : -bits,
                      c.family() == f.family() ? 0 : 1, kl_of(c)};
  };
  std::optional<Format> best;
  for (const Format& c : engine_formats(engine)) {
    if (c.id() == FormatId::kF32 || !stored(c) || !packs_row(c, head_dim)) continue;
    if (!best || rank(c) < rank(*best)) best = c;
  }
  if (!best) {
    fail(ErrorCode::kUnimplemented, "{} stores no format that packs rows of head_dim {}",
         engine.display, head_dim);
  }
  return *best;
}

}  // namespace kvplan
