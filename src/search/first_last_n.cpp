#include "search/first_last_n.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "search/layer_sides.h"

namespace kvplan::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string span_name(const std::vector<LayerCandidates>& layers, size_t first, size_t last) {
  return last - first == 1 ? fmt::format("{}", layers[first].layer)
                           : fmt::format("{}-{}", layers[first].layer, layers[last - 1].layer);
}

struct Segment {
  size_t begin = 0, end = 0;  // entries [begin, end)
};

std::vector<Segment> segments_of(size_t n, size_t first, size_t last) {
  std::vector<Segment> s;
  if (first > 0) s.push_back({0, first});
  if (first + last < n) s.push_back({first, n - last});
  if (last > 0) s.push_back({n - last, n});
  return s;
}

// One side's choice over a segment: a format every layer of it has, and the segment's sums.
struct SegmentChoice {
  Format format;
  double memory = 0;
  double error = 0;
};

std::vector<SegmentChoice> segment_choices(const std::vector<LayerSides>& sides, bool keys,
                                           const Segment& seg, MemoryMeasure measure) {
  const auto side_of = [&](size_t i) -> const std::vector<SideCandidate>& {
    return keys ? sides[i].keys : sides[i].values;
  };
  std::vector<SegmentChoice> out;
  for (const SideCandidate& c : side_of(seg.begin)) {
    SegmentChoice choice{c.format};
    bool everywhere = true;
    for (size_t i = seg.begin; i < seg.end && everywhere; ++i) {
      const auto& side = side_of(i);
      const auto it = std::find_if(side.begin(), side.end(),
                                   [&](const SideCandidate& o) { return o.format == c.format; });
      everywhere = it != side.end();
      if (everywhere) {
        choice.memory += memory_of(*it, measure);
        choice.error += it->error;
      }
    }
    if (everywhere) out.push_back(choice);
  }
  return out;
}

// A point of one side's envelope: a structure and what it costs at its best for that memory.
struct SidePoint {
  double memory = 0;
  double error = 0;
  size_t structure = 0;  // index into first_last_structures(n)
};

// The points (memory, least error) no other structure or choice of types beats.
std::vector<SidePoint> side_envelope(const std::vector<LayerSides>& sides, bool keys,
                                     const std::vector<std::pair<size_t, size_t>>& structures,
                                     MemoryMeasure measure) {
  const size_t n = sides.size();
  std::vector<SidePoint> all;
  for (size_t s = 0; s < structures.size(); ++s) {
    std::vector<std::vector<SegmentChoice>> choices;
    for (const Segment& seg : segments_of(n, structures[s].first, structures[s].second))
      choices.push_back(segment_choices(sides, keys, seg, measure));
    if (std::any_of(choices.begin(), choices.end(), [](const auto& c) { return c.empty(); }))
      continue;
    std::vector<size_t> at(choices.size(), 0);
    while (true) {
      SidePoint p{0, 0, s};
      for (size_t g = 0; g < choices.size(); ++g) {
        p.memory += choices[g][at[g]].memory;
        p.error += choices[g][at[g]].error;
      }
      all.push_back(p);
      size_t g = 0;
      while (g < at.size() && ++at[g] == choices[g].size()) at[g++] = 0;
      if (g == at.size()) break;
    }
  }
  // Per memory, the least error; among errors equal to it but for rounding, the simplest
  // structure. Then the points that clearly improve on every cheaper one.
  std::stable_sort(all.begin(), all.end(), [](const SidePoint& a, const SidePoint& b) {
    return a.memory != b.memory ? a.memory < b.memory : a.error < b.error;
  });
  std::vector<SidePoint> front;
  for (size_t i = 0; i < all.size();) {
    SidePoint pick = all[i];
    size_t j = i + 1;
    for (; j < all.size() && all[j].memory == all[i].memory; ++j) {
      if (!error_clearly_less(all[i].error, all[j].error) && all[j].structure < pick.structure)
        pick = all[j];
    }
    if (front.empty() || error_clearly_less(pick.error, front.back().error)) front.push_back(pick);
    i = j;
  }
  return front;
}

std::vector<LayerGroup> side_groups(const std::vector<LayerCandidates>& layers,
                                    const std::vector<LayerSides>& sides, bool keys,
                                    std::pair<size_t, size_t> structure, MemoryMeasure measure) {
  std::vector<LayerGroup> groups;
  for (const Segment& seg : segments_of(layers.size(), structure.first, structure.second)) {
    LayerGroup g;
    g.side = keys ? GroupSide::kKeys : GroupSide::kValues;
    for (size_t i = seg.begin; i < seg.end; ++i) g.layers.push_back(layers[i].layer);
    for (const SegmentChoice& c : segment_choices(sides, keys, seg, measure))
      g.choices.push_back(KvPair::uniform(c.format));
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace

std::string first_last_text(const std::vector<LayerCandidates>& layers, size_t first, size_t last) {
  const size_t n = layers.size();
  std::string text;
  if (first > 0) text += fmt::format("first {} (layers {})", first, span_name(layers, 0, first));
  if (first + last < n) {
    text += fmt::format("{}layers {} alike", text.empty() ? "" : ", ",
                        span_name(layers, first, n - last));
  }
  if (last > 0) {
    text += fmt::format("{}last {} (layers {})", text.empty() ? "" : ", ", last,
                        span_name(layers, n - last, n));
  }
  return text;
}

std::vector<std::pair<size_t, size_t>> first_last_structures(size_t n) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t apart = 0; apart <= n; ++apart) {
    for (size_t first = 0; first <= apart; ++first) out.emplace_back(first, apart - first);
  }
  return out;
}

std::optional<EngineSpace> split_first_last_n_space(const std::vector<LayerCandidates>& stored,
                                                    MemoryMeasure measure, double budget) {
  std::optional<std::vector<LayerSides>> sides = split_sides(stored);
  if (!sides || stored.empty()) return std::nullopt;
  const size_t n = stored.size();
  const std::vector<std::pair<size_t, size_t>> structures = first_last_structures(n);
  const std::vector<SidePoint> keys = side_envelope(*sides, true, structures, measure);
  const std::vector<SidePoint> values = side_envelope(*sides, false, structures, measure);
  if (keys.empty() || values.empty()) return std::nullopt;

  EngineSpace out;
  out.space.layers = stored;
  out.space.sides = std::move(*sides);
  out.space.measure = measure;
  out.space.budget = budget;
  const double budget_sum = budget_ceiling(summed_budget(out.space));
  // Both envelopes ascend in memory and descend in error: for each key point, the value point
  // with the most memory that still fits is the best one.
  size_t best_key = 0, best_value = 0;
  double best = kInf;
  size_t v = values.size();
  for (size_t k = 0; k < keys.size(); ++k) {
    while (v > 0 && keys[k].memory + values[v - 1].memory > budget_sum) --v;
    if (v == 0) break;
    const double total = keys[k].error + values[v - 1].error;
    if (error_clearly_less(total, best)) best = total, best_key = k, best_value = v - 1;
  }
  // Nothing fits: the least memory of each side, so that the budget error names the least the
  // engine can take.
  const auto key_structure = structures[keys[best_key].structure];
  const auto value_structure = structures[values[best_value].structure];

  out.space.groups = side_groups(stored, out.space.sides, true, key_structure, measure);
  for (LayerGroup& g : side_groups(stored, out.space.sides, false, value_structure, measure))
    out.space.groups.push_back(std::move(g));
  const std::string key_text = first_last_text(stored, key_structure.first, key_structure.second);
  const std::string value_text =
      first_last_text(stored, value_structure.first, value_structure.second);
  out.structure = key_text == value_text
                      ? fmt::format("keys and values each: {}", key_text)
                      : fmt::format("keys: {}; values: {}", key_text, value_text);
  out.may_cluster = false;
  out.structures_priced = structures.size() * structures.size();
  return out;
}

}  // namespace kvplan::search
