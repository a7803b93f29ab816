#include "search/held_out_kl.h"

#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "model/next_token_kl.h"

namespace kvplan::search {
namespace {

struct PromptScore {
  double kl = 0, nll = 0;
  int64_t agree = 0;
};

// Logits of rows [0, T-1): row t predicts token t+1.
RowMatrix next_token_logits(const Transformer& model, const std::vector<int32_t>& prompt,
                            const KvCacheOptions& kv) {
  KvCache cache(model.config(), kv);
  RowMatrix logits = model.forward(prompt, cache);
  logits.conservativeResize(logits.rows() - 1, Eigen::NoChange);
  return logits;
}

template <typename Fn>
void for_each_prompt(size_t n, Fn&& fn) {
  // One prompt per worker with serial GEMMs: results cannot depend on how many workers run.
  const size_t workers =
      std::max<size_t>(1, std::min<size_t>(n, static_cast<size_t>(compute_threads())));
  SerialEigenScope serial;
  std::vector<std::thread> pool;
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) {
        try {
          fn(i);
        } catch (...) {
          const std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

KvCacheOptions HeldOutKl::CacheRules::cache_for(const std::vector<KvPair>& pairs) const {
  KvCacheOptions kv = KvCacheOptions::per_layer(pairs, settings);
  kv.chunk_attends_quantized = chunk_attends_quantized;
  if (!kv_absmax.empty()) {
    for (size_t l = 0; l < pairs.size(); ++l) {
      kv.fp8_scales.push_back(fp8_scales_for(pairs[l], kv_absmax.at(l)));
    }
  }
  return kv;
}

HeldOutKl::HeldOutKl(const Transformer& model, std::vector<std::vector<int32_t>> prompts,
                     const CacheRules& rules)
    : model_(model), prompts_(std::move(prompts)), rules_(rules) {
  std::erase_if(prompts_, [](const std::vector<int32_t>& p) { return p.size() < 2; });
  if (prompts_.empty()) {
    fail(ErrorCode::kInvalidArgument, "held-out validation needs prompts of at least 2 tokens");
  }
  exact_.resize(prompts_.size());
  std::vector<double> nll(prompts_.size(), 0.0);
  for_each_prompt(prompts_.size(), [&](size_t i) {
    exact_[i] =
        reference_distribution(next_token_logits(model_, prompts_[i], KvCacheOptions::exact_kv()));
    for (size_t t = 0; t + 1 < prompts_[i].size(); ++t) {
      const auto row = static_cast<Eigen::Index>(t);
      nll[i] -= log_prob(exact_[i].logits.row(row), exact_[i].rows[t], prompts_[i][t + 1]);
    }
  });
  for (size_t i = 0; i < prompts_.size(); ++i) {
    exact_nll_ += nll[i];
    scored_ += static_cast<int64_t>(prompts_[i].size() - 1);
  }
}

int64_t HeldOutKl::n_tokens() const {
  int64_t n = 0;
  for (const auto& p : prompts_) n += static_cast<int64_t>(p.size());
  return n;
}

HeldOutKl::Result HeldOutKl::measure(const std::vector<KvPair>& pairs) const {
  const KvCacheOptions kv = rules_.cache_for(pairs);
  std::vector<PromptScore> scores(prompts_.size());
  for_each_prompt(prompts_.size(), [&](size_t i) {
    const RowMatrix quantized = next_token_logits(model_, prompts_[i], kv);
    const ReferenceDistribution& exact = exact_[i];
    PromptScore& s = scores[i];
    for (Eigen::Index t = 0; t < quantized.rows(); ++t) {
      const LogitSummary& p = exact.rows[static_cast<size_t>(t)];
      const LogitSummary q = summarize_logits(quantized.row(t));
      s.kl += next_token_kl(exact.logits.row(t), p, quantized.row(t), q);
      s.agree += p.argmax == q.argmax;
      s.nll -= log_prob(quantized.row(t), q, prompts_[i][static_cast<size_t>(t) + 1]);
    }
  });
  Result r;
  double kl = 0, nll = 0;
  int64_t agree = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const PromptScore& s = scores[i];
    r.kl_sums.push_back(s.kl);
    r.scored_per_prompt.push_back(static_cast<double>(prompts_[i].size() - 1));
    kl += s.kl;
    nll += s.nll;
    agree += s.agree;
  }
  const double n = static_cast<double>(scored_);
  r.scored = scored_;
  r.mean_kl = kl / n;
  r.top1_agreement = static_cast<double>(agree) / n;
  r.ppl = std::exp(nll / n);
  r.ppl_exact = std::exp(exact_nll_ / n);
  return r;
}

}  // namespace kvplan::search
