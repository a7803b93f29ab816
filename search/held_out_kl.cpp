#include "search/held_out_kl.h"

#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "model/eval.h"

namespace kvplan::search {
namespace {

struct PromptScore {
  double kl = 0, nll = 0;
  int64_t agree = 0;
};

// Log-probabilities of rows [0, T-1): row t predicts token t+1.
Eigen::MatrixXd next_token_log_probs(const Transformer& model, const std::vector<int32_t>& prompt,
                                     const KvCacheOptions& kv) {
  KvCache cache(model.config(), kv);
  const RowMatrix logits = model.forward(prompt, cache);
  return log_softmax_rows(logits).topRows(static_cast<Eigen::Index>(prompt.size() - 1));
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

HeldOutKl::HeldOutKl(const Transformer& model, std::vector<std::vector<int32_t>> prompts,
                     const CacheRules& rules)
    : model_(model), prompts_(std::move(prompts)), rules_(rules) {
  std::erase_if(prompts_, [](const std::vector<int32_t>& p) { return p.size() < 2; });
  if (prompts_.empty()) {
    fail(ErrorCode::kInvalidArgument, "held-out validation needs prompts of at least 2 tokens");
  }
  exact_log_probs_.resize(prompts_.size());
  std::vector<double> nll(prompts_.size(), 0.0);
  for_each_prompt(prompts_.size(), [&](size_t i) {
    // Kept in f32: a long selection text's [tokens, vocab] log-probabilities would take twice
    // the memory in f64, and KL sums are still accumulated in f64.
    const Eigen::MatrixXd lp =
        next_token_log_probs(model_, prompts_[i], KvCacheOptions::exact_kv());
    for (size_t t = 0; t + 1 < prompts_[i].size(); ++t) {
      nll[i] -= lp(static_cast<Eigen::Index>(t), prompts_[i][t + 1]);
    }
    exact_log_probs_[i] = lp.cast<float>();
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
  KvCacheOptions kv = KvCacheOptions::per_layer(pairs, rules_.settings);
  kv.chunk_attends_quantized = rules_.chunk_attends_quantized;
  if (!rules_.kv_absmax.empty()) {
    for (size_t l = 0; l < pairs.size(); ++l) {
      kv.fp8_scales.push_back(fp8_scales_for(pairs[l], rules_.kv_absmax.at(l)));
    }
  }
  std::vector<PromptScore> scores(prompts_.size());
  for_each_prompt(prompts_.size(), [&](size_t i) {
    const Eigen::MatrixXd q = next_token_log_probs(model_, prompts_[i], kv);
    const Eigen::MatrixXf& pf = exact_log_probs_[i];
    PromptScore& s = scores[i];
    for (Eigen::Index t = 0; t < q.rows(); ++t) {
      // KL(p || q) = sum_v p_v (log p_v - log q_v)
      const Eigen::RowVectorXd p = pf.row(t).cast<double>();
      s.kl += (p.array().exp() * (p - q.row(t)).array()).sum();
      Eigen::Index ap = 0, aq = 0;
      p.maxCoeff(&ap);
      q.row(t).maxCoeff(&aq);
      s.agree += ap == aq;
      s.nll -= q(t, prompts_[i][static_cast<size_t>(t) + 1]);
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
