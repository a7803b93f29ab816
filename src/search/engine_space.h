// The search space of what one serving engine can run (src/engines/engine.h): each layer keeps only the
// pairs the engine stores, and the layer groups follow the engine's granularity, so that every
// assignment the search makes is a configuration the engine takes as it is.
//
// - free and ranges (kvplan, ModelOpt, KVTuner, TensorRT-LLM): a group per layer;
// - global (llama.cpp): one group of every layer;
// - first/last-N (ik_llama.cpp): the first N, the middle and the last M layers, over every N and M,
//   set for keys and values apart (first_last_n.h); from a profile of joint pairs, which cannot be
//   taken apart, K and V share N and M;
// - skip list (vLLM, vLLM TurboQuant): per layer, the one quantized dtype (TurboQuant: the one
//   preset K/V pair) or the model's dtype, over every dtype; the engine's boundary layers
//   (TurboQuant: the first and last two) only at the model's dtype.
// Where there are several structures (N and M; vLLM's dtype; the engine's rotation settings, see
// rotation_settings in src/engines/engine.h), the one whose exact front of the additive surrogate has the
// least error within the budget is taken.
//
//   EngineSpace s =
//       engine_search_space(candidates, engine_spec(EngineId::kVllm), 64, kBytes, 6480);
//   s.space;      // what the validation loop searches
//   s.structure;  // "one quantized dtype, fp8_e4m3; any layer at the model's 16-bit dtype"
#pragma once

#include <string>
#include <vector>

#include "engines/engine.h"
#include "search/candidates.h"
#include "search/kv_search_problem.h"

namespace kvplan::search {

struct EngineSpace {
  SearchSpace space;
  std::string structure;         // the structure taken, in words
  bool may_cluster = true;       // false when the groups are the engine's, not the search's
  size_t structures_priced = 1;  // structures compared by their exact fronts
  RotationSetting rotation;      // the sides the engine stores rotated in this space
};

// `all` is every layer's candidates (unpruned), of a model whose layers have head_dim values per
// head (0: they differ; common_head_dim). Throws Error(kInvalidArgument) naming the first layer
// that has no pair the engine stores, with the formats to profile.
EngineSpace engine_search_space(const std::vector<LayerCandidates>& all, const EngineSpec& engine,
                                int head_dim, MemoryMeasure measure, double budget);

// a < b by more than rounding. The same layers' errors summed in other groupings differ in their
// last bits; such a difference must not choose one structure over a simpler one.
bool error_clearly_less(double a, double b);

// The least predicted (additive) error within the space's budget; infinity when nothing fits.
double best_error_within_budget(const SearchSpace& space);

}  // namespace kvplan::search
