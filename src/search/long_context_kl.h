// The chosen plan and the best uniform baseline at long contexts: the report text read as one
// token stream (its samples joined), cut into chunks of ctx tokens under llama-perplexity's
// protocol (BOS first, second half scored), for each ctx the model and the stream allow. The
// exact-KV run of a chunk is shared by every configuration measured on it.
//
//   LongContextKl lc(model, stream, bos, rules, {.contexts = {256, 2048, 8192}});
//   std::vector<LongContextKl::Row> rows = lc.measure({plan_pairs, baseline_pairs});
#pragma once

#include <cstdint>
#include <vector>

#include "formats/kv_pair.h"
#include "model/transformer.h"
#include "search/held_out_kl.h"

namespace kvplan::search {

class LongContextKl {
 public:
  struct Options {
    std::vector<int> contexts = {256, 2048, 8192};
    // Tokens run per context and configuration: chunks = max(1, tokens_per_context / ctx), so
    // every context scores about the same number of positions.
    int64_t tokens_per_context = 8192;
  };
  struct Row {
    int ctx = 0;
    int chunks = 0;
    int64_t scored = 0;
    std::vector<double> mean_kl{};  // one per configuration measured
  };

  // Contexts longer than the model's or the stream are left out (logged).
  LongContextKl(const Transformer& model, std::vector<int32_t> stream, int32_t bos_id,
                const HeldOutKl::CacheRules& rules, const Options& options);

  [[nodiscard]] const std::vector<int>& contexts() const { return contexts_; }
  [[nodiscard]] int64_t n_tokens() const { return static_cast<int64_t>(stream_.size()); }

  // Each configuration has one pair per model layer.
  [[nodiscard]] std::vector<Row> measure(const std::vector<std::vector<KvPair>>& configs) const;

 private:
  const Transformer& model_;
  std::vector<int32_t> stream_;
  int32_t bos_;
  HeldOutKl::CacheRules rules_;
  int64_t tokens_per_context_;
  std::vector<int> contexts_;
};

}  // namespace kvplan::search
