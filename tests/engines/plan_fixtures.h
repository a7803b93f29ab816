// Plans for the export tests: one layer per pair, 2 KV heads of head_dim values each.
#pragma once

#include <vector>

#include "plan/plan.h"

namespace kvplan::test {

inline Plan plan_with(const std::vector<const char*>& pairs, int head_dim = 64) {
  Plan p;
  p.tool_version = "test";
  p.model.name = "m";
  p.model.geometry = KvGeometry::uniform("m", static_cast<int>(pairs.size()), 2, head_dim);
  for (size_t l = 0; l < pairs.size(); ++l) {
    PlanLayer layer;
    layer.index = static_cast<int>(l);
    layer.pair = KvPair::parse(pairs[l]);
    p.layers.push_back(layer);
  }
  return p;
}

}  // namespace kvplan::test
