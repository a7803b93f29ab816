#include "search/engine_space.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "search/exact_front.h"
#include "search/first_last_n.h"
#include "search/pareto.h"

namespace kvplan::search {
namespace {

SearchSpace space_of(std::vector<LayerCandidates> layers, std::vector<LayerGroup> groups,
                     MemoryMeasure measure, double budget) {
  SearchSpace s;
  s.layers = std::move(layers);
  s.groups = std::move(groups);
  s.measure = measure;
  s.budget = budget;
  return s;
}

std::vector<LayerCandidates> pruned(const std::vector<LayerCandidates>& layers,
                                    MemoryMeasure measure) {
  std::vector<LayerCandidates> out;
  for (const LayerCandidates& l : layers)
    out.push_back({l.layer, pareto_front(l.candidates, measure), l.model_layer, l.head});
  return out;
}

std::vector<LayerGroup> group_per_layer(const std::vector<LayerCandidates>& layers) {
  std::vector<LayerGroup> groups;
  for (const LayerCandidates& l : layers) {
    LayerGroup g{{l.layer}, {}};
    for (const LayerCandidate& c : l.candidates) g.choices.push_back(c.pair);
    groups.push_back(std::move(g));
  }
  return groups;
}

// A group of the layers [first, last) of `layers` (entries, not model layer numbers), its choices
// the pairs every one of them has, in the first layer's order.
LayerGroup span_group(const std::vector<LayerCandidates>& layers, size_t first, size_t last) {
  LayerGroup g;
  for (size_t i = first; i < last; ++i) g.layers.push_back(layers[i].layer);
  for (const LayerCandidate& c : layers[first].candidates) {
    bool everywhere = true;
    for (size_t i = first + 1; i < last && everywhere; ++i) {
      everywhere = std::any_of(layers[i].candidates.begin(), layers[i].candidates.end(),
                               [&](const LayerCandidate& o) { return o.pair == c.pair; });
    }
    if (everywhere) g.choices.push_back(c.pair);
  }
  return g;
}

// Among spaces of one engine, the index of the one with the least error within the budget; on a
// tie the first, which callers list simplest first. When none fits, the one that takes the least
// memory, so that the budget error names the least the engine can take.
size_t best_space(const std::vector<const SearchSpace*>& spaces) {
  if (spaces.empty()) fail(ErrorCode::kInternal, "no engine structure to price");
  size_t best = 0;
  std::vector<double> errors;
  for (size_t i = 0; i < spaces.size(); ++i) {
    errors.push_back(best_error_within_budget(*spaces[i]));
    if (error_clearly_less(errors[i], errors[best])) best = i;
  }
  if (std::isinf(errors[best])) {
    double least = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < spaces.size(); ++i) {
      const double m = minimum_memory(*spaces[i], SearchTable::build(*spaces[i]));
      if (m < least) least = m, best = i;
    }
  }
  return best;
}

struct Priced {
  SearchSpace space;
  std::string structure;
};

EngineSpace pick(std::vector<Priced> options) {
  std::vector<const SearchSpace*> spaces;
  for (const Priced& o : options) spaces.push_back(&o.space);
  const size_t best = best_space(spaces);
  return {std::move(options[best].space),
          std::move(options[best].structure),
          false,
          options.size(),
          {}};
}

}  // namespace

bool error_clearly_less(double a, double b) {
  if (std::isinf(a) || std::isinf(b)) return a < b;
  return a < b - 1e-12 * std::max(std::fabs(a), std::fabs(b));
}

double best_error_within_budget(const SearchSpace& space) {
  for (const LayerGroup& g : space.groups) {
    if (g.choices.empty()) return std::numeric_limits<double>::infinity();
  }
  const ExactFront f = exact_front(space, SearchTable::build(space));
  return f.points.empty() ? std::numeric_limits<double>::infinity()
                          : f.points.back().predicted_error;
}

namespace {

// The granularity's space over the pairs one rotation setting stores on each layer.
EngineSpace structured_space(const std::vector<LayerCandidates>& stored, const EngineSpec& engine,
                             MemoryMeasure measure, double budget) {
  const size_t n = stored.size();

  switch (engine.granularity) {
    case LayerGranularity::kFree:
    case LayerGranularity::kRanges: {
      std::vector<LayerCandidates> p = pruned(stored, measure);
      std::vector<LayerGroup> groups = group_per_layer(p);
      return {space_of(std::move(p), std::move(groups), measure, budget),
              engine.granularity == LayerGranularity::kFree
                  ? "any pair on any layer"
                  : "any dtype on any layer (a range per run of layers alike)",
              true,
              1,
              {}};
    }
    case LayerGranularity::kGlobal:
      return pick({{space_of(stored, {span_group(stored, 0, n)}, measure, budget),
                    "one K type and one V type for every layer"}});
    case LayerGranularity::kFirstLastN: {
      if (std::optional<EngineSpace> split = split_first_last_n_space(stored, measure, budget))
        return std::move(*split);
      // Joint pairs cannot be taken apart: K and V share N and M.
      std::vector<Priced> options;
      for (const auto& [first, last] : first_last_structures(n)) {
        std::vector<LayerGroup> groups;
        if (first > 0) groups.push_back(span_group(stored, 0, first));
        if (first + last < n) groups.push_back(span_group(stored, first, n - last));
        if (last > 0) groups.push_back(span_group(stored, n - last, n));
        options.push_back(
            {space_of(stored, std::move(groups), measure, budget),
             first_last_text(stored, first, last) + " (the same N and M for keys and values)"});
      }
      return pick(std::move(options));
    }
    case LayerGranularity::kSkipList: {
      // One quantized pair (vLLM's dtype, or a TurboQuant preset) on any layer, the others at the
      // model's dtype; the engine's boundary layers always at the model's dtype.
      const std::vector<int> boundary = engine_boundary_layers(engine, static_cast<int>(n));
      const auto is_boundary = [&](int layer) {
        return std::find(boundary.begin(), boundary.end(), layer) != boundary.end();
      };
      const auto model_dtype = [](const KvPair& p) {
        return is_model_dtype(p.key) && is_model_dtype(p.value);
      };
      const std::string kept_text =
          boundary.empty() ? ""
                           : fmt::format("; layers {} at the model's dtype ({}'s boundary layers)",
                                         fmt::join(boundary, ", "), engine.display);
      const auto layers_with = [&](const auto& keep) {
        std::vector<LayerCandidates> layers;
        for (const LayerCandidates& s : stored) {
          LayerCandidates kept{s.layer, {}, s.model_layer, s.head};
          for (const LayerCandidate& o : s.candidates) {
            if (model_dtype(o.pair) || (!is_boundary(s.layer) && keep(o.pair)))
              kept.candidates.push_back(o);
          }
          layers.push_back(std::move(kept));
        }
        return layers;
      };
      std::set<std::string> seen;
      std::vector<Priced> options;
      for (const LayerCandidates& l : stored) {
        for (const LayerCandidate& c : l.candidates) {
          if (model_dtype(c.pair) || !seen.insert(c.pair.name()).second) continue;
          const KvPair q = c.pair;
          std::vector<LayerCandidates> layers =
              layers_with([&](const KvPair& p) { return p == q; });
          bool every_layer = true;
          for (const LayerCandidates& s : layers)
            every_layer = every_layer && !s.candidates.empty();
          if (!every_layer) continue;
          std::vector<LayerCandidates> p = pruned(layers, measure);
          std::vector<LayerGroup> groups = group_per_layer(p);
          const EnginePreset* preset = engine_preset(engine, q);
          options.push_back(
              {space_of(std::move(p), std::move(groups), measure, budget),
               fmt::format("{}; any layer at the model's 16-bit dtype{}",
                           preset ? fmt::format("one preset, {} ({})", preset->name, q.name())
                                  : fmt::format("one quantized dtype, {}", q.key.name()),
                           kept_text)});
        }
      }
      if (options.empty()) {
        std::vector<LayerCandidates> p =
            pruned(layers_with([](const KvPair&) { return false; }), measure);
        std::vector<LayerGroup> groups = group_per_layer(p);
        return {space_of(std::move(p), std::move(groups), measure, budget),
                "every layer at the model's 16-bit dtype",
                false,
                1,
                {}};
      }
      return pick(std::move(options));
    }
  }
  fail(ErrorCode::kInternal, "unknown layer granularity");
}

}  // namespace

EngineSpace engine_search_space(const std::vector<LayerCandidates>& all, const EngineSpec& engine,
                                int head_dim, MemoryMeasure measure, double budget) {
  require_packable(engine);
  const auto stored_under = [&](const auto& keep) {
    std::vector<LayerCandidates> stored;
    for (const LayerCandidates& l : all) {
      LayerCandidates kept{l.layer, {}, l.model_layer, l.head};
      for (const LayerCandidate& c : l.candidates) {
        if (keep(c.pair)) kept.candidates.push_back(c);
      }
      stored.push_back(std::move(kept));
    }
    return stored;
  };
  const auto every_layer_has_one = [](const std::vector<LayerCandidates>& layers) {
    return std::all_of(layers.begin(), layers.end(),
                       [](const LayerCandidates& l) { return !l.candidates.empty(); });
  };
  // Each rotation setting the engine runs at this head_dim is a space of its own (a side is
  // rotated on every layer or on none); the best within the budget is taken, the setting the
  // engine takes with no extra flag first on a tie.
  const std::vector<RotationSetting> settings = rotation_settings(engine, head_dim);
  std::vector<EngineSpace> options;
  for (const RotationSetting& setting : settings) {
    std::vector<LayerCandidates> stored =
        stored_under([&](const KvPair& p) { return setting_stores(engine, setting, head_dim, p); });
    if (!every_layer_has_one(stored)) continue;
    EngineSpace option = structured_space(stored, engine, measure, budget);
    const std::string words = rotation_words(engine, setting);
    if (settings.size() > 1 || setting.disabled_by_environment) option.structure += "; " + words;
    option.rotation = setting;
    options.push_back(std::move(option));
  }
  if (options.empty()) {
    const std::vector<LayerCandidates> any =
        stored_under([&](const KvPair& p) { return engine_stores(engine, p, head_dim); });
    for (const LayerCandidates& l : any) {
      if (!l.candidates.empty()) continue;
      fail(ErrorCode::kInvalidArgument,
           "--engine {}: the profile has no pair {} stores on layer {} ({} stores {}{}); "
           "profile with --formats {}",
           engine.name, engine.display, l.layer, engine.display, engine_format_list(engine),
           !engine.presets.empty()      ? ", as its K/V presets"
           : engine.one_dtype_per_layer ? ", one dtype for K and V of a layer"
                                        : "",
           engine.name == "kvplan" ? "all" : engine_format_list(engine, ","));
    }
    fail(ErrorCode::kInvalidArgument,
         "--engine {}: no one rotation setting of {} stores a pair of the profile on every layer "
         "(a side is rotated on every layer or on none)",
         engine.name, engine.display);
  }
  size_t priced = 0;
  std::vector<const SearchSpace*> spaces;
  for (const EngineSpace& o : options) {
    priced += o.structures_priced;
    spaces.push_back(&o.space);
  }
  EngineSpace out = std::move(options[best_space(spaces)]);
  out.structures_priced = priced;
  return out;
}

}  // namespace kvplan::search
