// A KV memory budget: what the user asked for (BudgetRequest, before the model is known), and the
// limit it comes to on a model's KV geometry (Budget), with the one tolerance every comparison of
// memory with a budget uses.
//
//   BudgetRequest r = BudgetRequest::effective_bits(4.5);
//   Budget b = resolve_budget(r, geometry);   // SmolLM2-135M: 6480 bytes per token
//   b.fits(6474);                             // true
//   b.require_at_least(smallest, "");         // Error(kInvalidArgument) when no plan fits
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "formats/kv_geometry.h"

namespace kvplan {

// What a budget and the search's memory objective count: real bytes per token over all layers, or
// KVTuner's nominal bits (the mean over layers of (key bits + value bits) / 2).
enum class MemoryMeasure { kBits, kBytes };

// Memory summed in another order than the budget was computed in may exceed it by rounding alone:
// a plan within this relative margin is within the budget.
inline constexpr double kBudgetTolerance = 1e-12;

// The most memory a budget of `limit` admits.
[[nodiscard]] constexpr double budget_ceiling(double limit) {
  return limit * (1 + kBudgetTolerance);
}
[[nodiscard]] constexpr bool within_budget(double memory, double limit) {
  return memory <= budget_ceiling(limit);
}

// A budget as the user gave it (one of the search flags), before it meets a model.
struct BudgetRequest {
  enum class Kind { kNone, kBytesPerToken, kEffectiveBits, kNominalBits, kGpuMemory };
  Kind kind = Kind::kNone;
  double value = 0;  // bytes per token, or bits per value
  // kGpuMemory: the memory, what the weights take of it, and what it must hold.
  uint64_t gpu_bytes = 0, weights_bytes = 0;
  int64_t context = 0, sequences = 1;
  std::string gpu_text, weights_text, context_text;  // as typed, for the description
  // The objective when there is no budget (kNone): bytes (default) or nominal bits.
  MemoryMeasure unbounded_measure = MemoryMeasure::kBytes;

  static BudgetRequest none(MemoryMeasure measure = MemoryMeasure::kBytes);
  static BudgetRequest bytes_per_token(double bytes);
  static BudgetRequest effective_bits(double bits);
  static BudgetRequest nominal_bits(double bits);
  // Error(kInvalidArgument) naming the flag for a weight size that leaves nothing for the cache,
  // a context or a sequence count below 1.
  static BudgetRequest gpu_memory(uint64_t gpu_bytes, uint64_t weights_bytes, int64_t context,
                                  int64_t sequences, std::string gpu_text, std::string weights_text,
                                  std::string context_text);
};

struct Budget {
  MemoryMeasure measure = MemoryMeasure::kBytes;
  double limit = std::numeric_limits<double>::infinity();  // on `measure`
  std::string description;  // what was asked, as provenance records it
  // Per layer, the share of a context's tokens the layer holds (min(context, window) / context,
  // below 1 on sliding-window layers of a GPU-memory budget); empty = every layer holds every
  // token. Scales each layer's bytes per token, so that the budget counts what the cache holds.
  std::vector<double> layer_token_share;

  [[nodiscard]] bool bounded() const { return limit < std::numeric_limits<double>::infinity(); }
  [[nodiscard]] bool fits(double memory) const { return within_budget(memory, limit); }
  // Error(kInvalidArgument) "budget <description>: the smallest possible plan takes ..." when
  // `smallest` (on `measure`) does not fit; `why` (may be empty) says what held the layers up.
  void require_at_least(double smallest, std::string_view why) const;
};

// The budget on a model's KV geometry: effective bits become bytes per token (bits x values / 8),
// a GPU memory budget bytes per token of its context x sequences, each sliding layer weighed by
// the share of the context it holds.
Budget resolve_budget(const BudgetRequest& request, const KvGeometry& geometry);

}  // namespace kvplan
