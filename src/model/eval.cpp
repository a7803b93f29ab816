#include "model/eval.h"

#include <chrono>
#include <cmath>

#include "core/error.h"

namespace kvplan {
namespace {

struct Accumulator {
  double nll_sum = 0, nll_sq_sum = 0, nll_exact_sum = 0, kl_sum = 0, kl_max = 0;
  int64_t n = 0, top1_same = 0;
  double seconds = 0;
  int64_t tokens = 0;

  // Scores rows [begin, end) of a chunk: row j predicts targets[j + 1].
  void score(const Eigen::MatrixXd& lq, const Eigen::MatrixXd* le, std::span<const int32_t> targets,
             Eigen::Index begin, Eigen::Index end) {
    for (Eigen::Index j = begin; j < end; ++j) {
      const int32_t next = targets[static_cast<size_t>(j + 1)];
      const double nll = -lq(j, next);
      nll_sum += nll;
      nll_sq_sum += nll * nll;
      ++n;
      if (le != nullptr) {
        nll_exact_sum += -(*le)(j, next);
        double kl = 0;
        for (Eigen::Index v = 0; v < lq.cols(); ++v) {
          const double lp = (*le)(j, v);
          kl += std::exp(lp) * (lp - lq(j, v));
        }
        kl = std::max(kl, 0.0);
        kl_sum += kl;
        kl_max = std::max(kl_max, kl);
        Eigen::Index aq, ae;
        lq.row(j).maxCoeff(&aq);
        le->row(j).maxCoeff(&ae);
        top1_same += aq == ae;
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

// Runs one sequence from an empty cache with `kv`, timing it.
RowMatrix run(const Transformer& model, std::span<const int32_t> tokens, const KvCacheOptions& kv,
              Accumulator* timing) {
  KvCache cache(model.config(), kv);
  const auto start = std::chrono::steady_clock::now();
  RowMatrix logits = model.forward(tokens, cache);
  if (timing != nullptr) {
    timing->seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    timing->tokens += static_cast<int64_t>(tokens.size());
  }
  return logits;
}

}  // namespace

Eigen::MatrixXd log_softmax_rows(const RowMatrix& logits) {
  Eigen::MatrixXd out = logits.cast<double>();
  for (Eigen::Index t = 0; t < out.rows(); ++t) {
    const double max = out.row(t).maxCoeff();
    const double lse = max + std::log((out.row(t).array() - max).exp().sum());
    out.row(t).array() -= lse;
  }
  return out;
}

EvalResult evaluate_perplexity(const Transformer& model, std::span<const int32_t> tokens,
                               int32_t bos_id, const EvalOptions& options) {
  const int n_ctx = options.n_ctx;
  if (n_ctx < 4) fail(ErrorCode::kInvalidArgument, "--ctx {}: expected at least 4 tokens", n_ctx);
  int n_chunks = static_cast<int>(tokens.size() / static_cast<size_t>(n_ctx));
  if (n_chunks == 0) {
    fail(ErrorCode::kInvalidArgument, "the text has {} tokens, fewer than one chunk of --ctx {}",
         tokens.size(), n_ctx);
  }
  if (options.max_chunks > 0) n_chunks = std::min(n_chunks, options.max_chunks);
  const bool compare = options.compare_with_exact && !options.kv.exact;
  Accumulator acc;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int c = 0; c < n_chunks; ++c) {
    const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(c) * n_ctx;
    std::copy(first, first + n_ctx, chunk.begin());
    chunk[0] = bos_id;
    const Eigen::MatrixXd lq = log_softmax_rows(run(model, chunk, options.kv, &acc));
    Eigen::MatrixXd le;
    if (compare) le = log_softmax_rows(run(model, chunk, KvCacheOptions::exact_kv(), nullptr));
    // Targets are the original tokens (the BOS replaces only the input at position 0).
    std::span<const int32_t> targets(&*first, static_cast<size_t>(n_ctx));
    acc.score(lq, compare ? &le : nullptr, targets, n_ctx / 2, n_ctx - 1);
    if (options.progress) options.progress(c + 1, n_chunks);
  }
  EvalResult r = acc.result(n_chunks, compare);
  if (!compare && options.kv.exact) r.ppl_exact = r.ppl;
  return r;
}

EvalResult evaluate_prompts(const Transformer& model,
                            const std::vector<std::vector<int32_t>>& prompts,
                            const EvalOptions& options) {
  const bool compare = options.compare_with_exact && !options.kv.exact;
  Accumulator acc;
  int done = 0;
  for (const std::vector<int32_t>& p : prompts) {
    if (p.size() < 2) continue;  // nothing to predict
    const Eigen::MatrixXd lq = log_softmax_rows(run(model, p, options.kv, &acc));
    Eigen::MatrixXd le;
    if (compare) le = log_softmax_rows(run(model, p, KvCacheOptions::exact_kv(), nullptr));
    acc.score(lq, compare ? &le : nullptr, p, 0, static_cast<Eigen::Index>(p.size()) - 1);
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
