#include "search/long_context_kl.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "model/eval.h"

namespace kvplan::search {

LongContextKl::LongContextKl(const Transformer& model, std::vector<int32_t> stream, int32_t bos_id,
                             const HeldOutKl::CacheRules& rules, const Options& options)
    : model_(model),
      stream_(std::move(stream)),
      bos_(bos_id),
      rules_(rules),
      tokens_per_context_(options.tokens_per_context) {
  if (tokens_per_context_ <= 0) {
    fail(ErrorCode::kInvalidArgument, "long-context KL: tokens per context must be positive");
  }
  const int64_t model_context = model_.config().context_length;
  for (const int ctx : options.contexts) {
    if (ctx < 4) fail(ErrorCode::kInvalidArgument, "long-context KL: ctx {} is below 4", ctx);
    if (model_context > 0 && ctx > model_context) {
      spdlog::info("long-context KL: ctx {} left out, the model's context is {} tokens", ctx,
                   model_context);
    } else if (static_cast<size_t>(ctx) > stream_.size()) {
      spdlog::info("long-context KL: ctx {} left out, the report text has {} tokens", ctx,
                   stream_.size());
    } else {
      contexts_.push_back(ctx);
    }
  }
}

std::vector<LongContextKl::Row> LongContextKl::measure(
    const std::vector<std::vector<KvPair>>& configs) const {
  std::vector<KvCacheOptions> caches;
  const KvGeometry geometry = kv_geometry(model_.config());
  for (const std::vector<KvPair>& pairs : configs) {
    caches.push_back(rules_.cache_for(pairs, geometry));
  }
  std::vector<Row> rows;
  for (const int ctx : contexts_) {
    EvalOptions options;
    options.n_ctx = ctx;
    options.max_chunks = static_cast<int>(std::max<int64_t>(1, tokens_per_context_ / ctx));
    const std::vector<EvalResult> results =
        evaluate_perplexity_configs(model_, stream_, bos_, options, caches, /*compare=*/true);
    Row row{.ctx = ctx, .chunks = results.front().n_chunks, .scored = results.front().n_scored};
    for (const EvalResult& r : results) row.mean_kl.push_back(r.mean_kl);
    spdlog::info("long-context KL at ctx {}: {} chunks, {} scored positions", ctx, row.chunks,
                 row.scored);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace kvplan::search
