// The real error the validation loop measures: mean KL(exact || quantized) of next-token
// distributions over held-out prompts, with every layer's KV quantized by its pair. The exact-KV
// logits are computed once and kept up to an eighth of physical memory; each measurement runs the
// quantized model, and the exact one again only for prompts whose logits were not kept —
// measure_all measures many configurations prompt by prompt, so that such a prompt's exact forward
// runs once for all of them. Prompts run in parallel, each with serial GEMMs, and sums are reduced
// in prompt order, so results do not depend on the thread count, the memory kept or the batching.
// With a MeasurementStore, a (configuration, prompt) cell already in it is read back instead of
// measured, and each cell measured is added as soon as it is done, so a run stopped halfway keeps
// what it measured; a prompt whose cells are all there does not run at all.
//
//   HeldOutKl kl(model, prompts, {settings, profile.chunk_attends_quantized, profile.kv_absmax});
//   HeldOutKl::Result r = kl.measure(pairs);  // r.mean_kl, r.top1_agreement, r.ppl
//   std::vector<HeldOutKl::Result> rs = kl.measure_all({plan, uniform_a, uniform_b});
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <Eigen/Dense>

#include "formats/fp8_scales.h"
#include "formats/kv_pair.h"
#include "formats/quant_settings.h"
#include "model/next_token_kl.h"
#include "model/transformer.h"
#include "search/measurement_store.h"

namespace kvplan::search {

class HeldOutKl {
 public:
  struct Result {
    double mean_kl = 0;         // nats per scored position
    double top1_agreement = 0;  // fraction of positions whose argmax matches exact KV
    double ppl = 0;             // perplexity of the prompts' own next tokens, quantized KV
    double ppl_exact = 0;
    int64_t scored = 0;
    // Per prompt: sum of KL over its scored positions, and their count (paired bootstrap units).
    std::vector<double> kl_sums;
    std::vector<double> scored_per_prompt;
  };

  // How the quantized cache behaves: the profile's settings, so that the error the search is
  // checked against is measured under the same rules the profile was measured under.
  struct CacheRules {
    QuantSettings settings;
    bool chunk_attends_quantized = true;  // see KvCacheOptions
    // [layer] K/V maxima FP8 layers take their per-head scales from; empty = scale 1.
    std::vector<KvHeadAbsmax> kv_absmax{};

    // The cache options of a configuration under these rules: one pair per model layer, or one
    // per KV head (layer-major, geometry.n_kv_heads_total() of them; per-KV-head plans). Throws
    // Error(kInvalidArgument) for any other count.
    [[nodiscard]] KvCacheOptions cache_for(const std::vector<KvPair>& pairs,
                                           const KvGeometry& geometry) const;
  };

  // Throws Error(kInvalidArgument) if there are no prompts with at least two tokens.
  // `exact_logits_bytes`: the most exact logits kept (default: an eighth of physical memory); the
  // results do not depend on it. `store` (may be null; must outlive this): cells found there are
  // not measured again, cells measured are added to it (search/measurement_store.h).
  HeldOutKl(const Transformer& model, std::vector<std::vector<int32_t>> prompts,
            const CacheRules& rules, std::optional<size_t> exact_logits_bytes = std::nullopt,
            MeasurementStore* store = nullptr);

  // `pairs` has one entry per model layer, or one per KV head (CacheRules::cache_for).
  [[nodiscard]] Result measure(const std::vector<KvPair>& pairs) const;
  // measure() of each configuration, bit for bit, with one exact forward per prompt whose exact
  // logits were not kept instead of one per configuration (Gemma 3's vocabulary keeps 2 of 10).
  [[nodiscard]] std::vector<Result> measure_all(
      const std::vector<std::vector<KvPair>>& configs) const;
  [[nodiscard]] int64_t n_tokens() const;
  [[nodiscard]] int64_t n_scored() const { return scored_; }
  [[nodiscard]] size_t n_prompts() const { return prompts_.size(); }

 private:
  const Transformer& model_;
  std::vector<std::vector<int32_t>> prompts_;
  CacheRules rules_;
  MeasurementStore* store_;
  std::vector<uint64_t> prompt_keys_;  // per prompt, with a store: what its cells' keys start from
  [[nodiscard]] ReferenceDistribution exact_distribution(size_t prompt) const;

  // Per prompt: exact-KV logits [T - 1, vocab] and their summaries, or the summaries only (logits
  // empty) past the memory budget.
  std::vector<ReferenceDistribution> exact_;
  double exact_nll_ = 0;
  int64_t scored_ = 0;
};

}  // namespace kvplan::search
