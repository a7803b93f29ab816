#include "model/eval.h"

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "model/next_token_kl.h"

namespace kvplan {
namespace {

struct Accumulator {
  double nll_sum = 0, nll_sq_sum = 0, nll_exact_sum = 0, kl_sum = 0, kl_max = 0;
  int64_t n = 0, top1_same = 0;
  double seconds = 0;
  int64_t tokens = 0;

  // Scores logits rows [0, rows): row j predicts targets[first_target + j], against the
  // exact-KV logits when given.
  void score(const RowMatrix& quantized, const ReferenceDistribution* exact,
             std::span<const int32_t> targets, size_t first_target) {
    for (Eigen::Index j = 0; j < quantized.rows(); ++j) {
      const int32_t next = targets[first_target + static_cast<size_t>(j)];
      const LogitSummary q = summarize_logits(quantized.row(j));
      const double nll = -log_prob(quantized.row(j), q, next);
      nll_sum += nll;
      nll_sq_sum += nll * nll;
      ++n;
      if (exact != nullptr) {
        const LogitSummary& p = exact->rows[static_cast<size_t>(j)];
        nll_exact_sum += -log_prob(exact->logits.row(j), p, next);
        const double kl = next_token_kl(exact->logits.row(j), p, quantized.row(j), q);
        kl_sum += kl;
        kl_max = std::max(kl_max, kl);
        top1_same += p.argmax == q.argmax;
      }
    }
  }

  EvalResult result(int chunks, bool compared) const {
    EvalResult r;
    r.n_chunks = chunks;
    r.n_scored = n;
    if (n == 0) return r;
    const double mean = nll_sum / static_cast<double>(n);
    r.ppl = std::exp(mean);
    if (n > 1) {
      const double var = (nll_sq_sum / static_cast<double>(n) - mean * mean) *
                         static_cast<double>(n) / static_cast<double>(n - 1);
      r.ppl_stderr = r.ppl * std::sqrt(std::max(var, 0.0) / static_cast<double>(n));
    }
    if (compared) {
      r.ppl_exact = std::exp(nll_exact_sum / static_cast<double>(n));
      r.mean_kl = kl_sum / static_cast<double>(n);
      r.max_kl = kl_max;
      r.top1_agreement = static_cast<double>(top1_same) / static_cast<double>(n);
    }
    r.seconds = seconds;
    r.tokens_per_second = seconds > 0 ? static_cast<double>(tokens) / seconds : 0;
    return r;
  }
};

// Runs one sequence from an empty cache with `kv`, timing it; logits of rows [logits_from, T).
RowMatrix run(const Transformer& model, std::span<const int32_t> tokens, const KvCacheOptions& kv,
              Accumulator* timing, size_t logits_from) {
  KvCache cache(model.config(), kv);
  const auto start = std::chrono::steady_clock::now();
  RowMatrix logits = model.forward(tokens, cache, nullptr, {.logits_from_row = logits_from});
  if (timing != nullptr) {
    timing->seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    timing->tokens += static_cast<int64_t>(tokens.size());
  }
  return logits;
}

}  // namespace

EvalResult evaluate_perplexity(const Transformer& model, std::span<const int32_t> tokens,
                               int32_t bos_id, const EvalOptions& options) {
  const bool compare = options.compare_with_exact && !options.kv.exact;
  EvalResult r =
      evaluate_perplexity_configs(model, tokens, bos_id, options, {options.kv}, compare).front();
  if (!compare && options.kv.exact) r.ppl_exact = r.ppl;
  return r;
}

std::vector<EvalResult> evaluate_perplexity_configs(const Transformer& model,
                                                    std::span<const int32_t> tokens, int32_t bos_id,
                                                    const EvalOptions& options,
                                                    const std::vector<KvCacheOptions>& configs,
                                                    bool compare) {
  const int n_ctx = options.n_ctx;
  if (n_ctx < 4) fail(ErrorCode::kInvalidArgument, "--ctx {}: expected at least 4 tokens", n_ctx);
  int n_chunks = static_cast<int>(tokens.size() / static_cast<size_t>(n_ctx));
  if (n_chunks == 0) {
    fail(ErrorCode::kInvalidArgument, "the text has {} tokens, fewer than one chunk of --ctx {}",
         tokens.size(), n_ctx);
  }
  if (options.max_chunks > 0) n_chunks = std::min(n_chunks, options.max_chunks);
  std::vector<Accumulator> acc(configs.size());
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  // Only rows [n_ctx / 2, n_ctx - 1) are scored; the last row predicts past the chunk.
  const size_t from = static_cast<size_t>(n_ctx / 2);
  for (int c = 0; c < n_chunks; ++c) {
    const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(c) * n_ctx;
    std::copy(first, first + n_ctx, chunk.begin());
    chunk[0] = bos_id;
    // The exact run and its row summaries are shared by every configuration.
    ReferenceDistribution exact;
    if (compare) {
      RowMatrix logits = run(model, chunk, KvCacheOptions::exact_kv(), nullptr, from);
      logits.conservativeResize(logits.rows() - 1, Eigen::NoChange);
      exact = reference_distribution(std::move(logits));
    }
    // Targets are the original tokens (the BOS replaces only the input at position 0).
    std::span<const int32_t> targets(&*first, static_cast<size_t>(n_ctx));
    for (size_t i = 0; i < configs.size(); ++i) {
      RowMatrix quantized = run(model, chunk, configs[i], &acc[i], from);
      quantized.conservativeResize(quantized.rows() - 1, Eigen::NoChange);
      acc[i].score(quantized, compare ? &exact : nullptr, targets, from + 1);
    }
    if (options.progress) options.progress(c + 1, n_chunks);
  }
  std::vector<EvalResult> results;
  for (const Accumulator& a : acc) results.push_back(a.result(n_chunks, compare));
  return results;
}

EvalResult evaluate_prompts(const Transformer& model,
                            const std::vector<std::vector<int32_t>>& prompts,
                            const EvalOptions& options) {
  const bool compare = options.compare_with_exact && !options.kv.exact;
  Accumulator acc;
  int done = 0;
  for (const std::vector<int32_t>& p : prompts) {
    if (p.size() < 2) continue;  // nothing to predict
    RowMatrix quantized = run(model, p, options.kv, &acc, 0);
    const Eigen::Index rows = quantized.rows() - 1;  // the last row predicts past the prompt
    quantized.conservativeResize(rows, Eigen::NoChange);
    ReferenceDistribution exact;
    if (compare) {
      RowMatrix logits = run(model, p, KvCacheOptions::exact_kv(), nullptr, 0);
      logits.conservativeResize(rows, Eigen::NoChange);
      exact = reference_distribution(std::move(logits));
    }
    acc.score(quantized, compare ? &exact : nullptr, p, 1);
    if (options.progress) options.progress(++done, static_cast<int>(prompts.size()));
  }
  if (acc.n == 0) {
    fail(ErrorCode::kInvalidArgument, "no prompt has 2 or more tokens: nothing to evaluate");
  }
  EvalResult r = acc.result(static_cast<int>(prompts.size()), compare);
  if (!compare && options.kv.exact) r.ppl_exact = r.ppl;
  return r;
}

}  // namespace kvplan
