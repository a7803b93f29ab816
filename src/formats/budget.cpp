#include "formats/budget.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/kv_bytes.h"

namespace kvplan {

BudgetRequest BudgetRequest::none(MemoryMeasure measure) {
  BudgetRequest r;
  r.unbounded_measure = measure;
  return r;
}

namespace {

BudgetRequest of_kind(BudgetRequest::Kind kind, double value) {
  BudgetRequest r;
  r.kind = kind;
  r.value = value;
  return r;
}

}  // namespace

BudgetRequest BudgetRequest::bytes_per_token(double bytes) {
  return of_kind(Kind::kBytesPerToken, bytes);
}

BudgetRequest BudgetRequest::effective_bits(double bits) {
  return of_kind(Kind::kEffectiveBits, bits);
}

BudgetRequest BudgetRequest::nominal_bits(double bits) {
  return of_kind(Kind::kNominalBits, bits);
}

BudgetRequest BudgetRequest::gpu_memory(uint64_t gpu_bytes, uint64_t weights_bytes, int64_t context,
                                        int64_t sequences, std::string gpu_text,
                                        std::string weights_text, std::string context_text) {
  if (weights_bytes >= gpu_bytes) {
    fail(ErrorCode::kInvalidArgument, "--weights-bytes leaves no memory for the KV cache");
  }
  if (context < 1) fail(ErrorCode::kInvalidArgument, "--context must be >= 1 token");
  if (sequences < 1) fail(ErrorCode::kInvalidArgument, "--sequences must be >= 1");
  BudgetRequest r = of_kind(Kind::kGpuMemory, 0);
  r.gpu_bytes = gpu_bytes;
  r.weights_bytes = weights_bytes;
  r.context = context;
  r.sequences = sequences;
  r.gpu_text = std::move(gpu_text);
  r.weights_text = std::move(weights_text);
  r.context_text = std::move(context_text);
  return r;
}

void Budget::require_at_least(double smallest, std::string_view why) const {
  if (fits(smallest)) return;
  fail(ErrorCode::kInvalidArgument,
       "budget {}: the smallest possible plan takes {} {} (every layer in its smallest "
       "candidate{})",
       description, smallest,
       measure == MemoryMeasure::kBytes ? "bytes per token" : "equivalent bits",
       why.empty() ? "" : fmt::format("; {}", why));
}

Budget resolve_budget(const BudgetRequest& r, const KvGeometry& geometry) {
  Budget b;
  switch (r.kind) {
    case BudgetRequest::Kind::kNone:
      b.measure = r.unbounded_measure;
      b.description = "none";
      break;
    case BudgetRequest::Kind::kBytesPerToken:
      b.limit = r.value;
      b.description = fmt::format("{} bytes per token", r.value);
      break;
    case BudgetRequest::Kind::kEffectiveBits:
      b.limit = r.value * kv_values_per_token(geometry) / 8;
      b.description =
          fmt::format("{} effective bits per value = {:.1f} bytes per token", r.value, b.limit);
      break;
    case BudgetRequest::Kind::kNominalBits:
      b.measure = MemoryMeasure::kBits;
      b.limit = r.value;
      b.description = fmt::format("{} nominal (KVTuner equivalent) bits", r.value);
      break;
    case BudgetRequest::Kind::kGpuMemory: {
      const int64_t tokens = r.context * r.sequences;
      b.limit = static_cast<double>(r.gpu_bytes - r.weights_bytes) / static_cast<double>(tokens);
      b.description = fmt::format(
          "{} of GPU memory, {} weights, {} tokens x {} sequences = {:.1f} bytes per token",
          r.gpu_text, r.weights_text.empty() ? "0" : r.weights_text, r.context_text, r.sequences,
          b.limit);
      // A sliding layer holds min(context, window) tokens of each sequence.
      const auto slides = [&](const KvLayerGeometry& l) {
        return l.sliding_window > 0 && l.sliding_window < r.context;
      };
      const auto sliding = std::count_if(geometry.layers.begin(), geometry.layers.end(), slides);
      if (sliding > 0) {
        for (const KvLayerGeometry& l : geometry.layers) {
          b.layer_token_share.push_back(slides(l) ? static_cast<double>(l.sliding_window) /
                                                        static_cast<double>(r.context)
                                                  : 1.0);
        }
        b.description += fmt::format(
            " (per context token: the {} sliding-window layers count their window's share)",
            sliding);
      }
      break;
    }
  }
  return b;
}

}  // namespace kvplan
