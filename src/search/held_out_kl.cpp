#include "search/held_out_kl.h"

#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/system_memory.h"
#include "model/next_token_kl.h"

namespace kvplan::search {
namespace {

using PromptScore = MeasurementStore::Cell;

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

// Bytes of exact logits one instance keeps: an eighth of physical memory, so that the selection,
// report and long-context sets fit beside the model (Gemma 3's 262,144-token vocabulary makes one
// 1,024-token prompt's logits 1 GiB). Prompts past it are re-run exactly in each measurement,
// which gives the same bits (the same serial forward), at the cost of that forward.
size_t exact_logits_budget() {
  const std::optional<uint64_t> physical = physical_memory_bytes();
  return physical ? static_cast<size_t>(*physical / 8) : size_t{2} << 30;
}

// What a prompt's cells depend on besides their configuration: the store's context, the cache
// rules, the tokens and the exact model's reference on them (which stands for the weights and
// numerics).
uint64_t prompt_key(const MeasurementStore& store, const HeldOutKl::CacheRules& rules,
                    const std::vector<int32_t>& prompt, const ReferenceDistribution& exact) {
  Hasher h;
  h.update("kvplan.held_out_kl.cell/v1").update(store.context());
  const QuantSettings& q = rules.settings;
  h.update(quant_mode_name(q.mode)).update_u64(q.group_size).update_u64(q.residual_length);
  h.update_u64(q.block_size).update_u64(rules.chunk_attends_quantized ? 1 : 0);
  h.update_u64(rules.kv_absmax.size());
  for (const KvHeadAbsmax& a : rules.kv_absmax) {
    h.update_bytes(std::as_bytes(std::span(a.key))).update_bytes(std::as_bytes(std::span(a.value)));
  }
  h.update_bytes(std::as_bytes(std::span(prompt)));
  for (const LogitSummary& row : exact.rows) {
    h.update_raw(std::as_bytes(std::span(&row.log_sum_exp, 1)));
    h.update_raw(std::as_bytes(std::span(&row.argmax, 1)));
  }
  return h.digest();
}

uint64_t cell_key(uint64_t prompt, const std::vector<KvPair>& pairs) {
  Hasher h;
  h.update_u64(prompt).update_u64(pairs.size());
  for (const KvPair& p : pairs) h.update(p.name());
  return h.digest();
}

}  // namespace

KvCacheOptions HeldOutKl::CacheRules::cache_for(const std::vector<KvPair>& pairs,
                                                const KvGeometry& geometry) const {
  const size_t n_layers = geometry.layers.size();
  KvCacheOptions kv = KvCacheOptions::of_config(pairs, geometry, settings);
  kv.chunk_attends_quantized = chunk_attends_quantized;
  if (!kv_absmax.empty()) {
    for (size_t l = 0; l < n_layers; ++l) {
      kv.fp8_scales.push_back(l < kv.head_pairs.size() && !kv.head_pairs[l].empty()
                                  ? fp8_scales_for_heads(kv.head_pairs[l], kv_absmax.at(l))
                                  : fp8_scales_for(kv.pairs[l], kv_absmax.at(l)));
    }
  }
  return kv;
}

HeldOutKl::HeldOutKl(const Transformer& model, std::vector<std::vector<int32_t>> prompts,
                     const CacheRules& rules, std::optional<size_t> exact_logits_bytes,
                     MeasurementStore* store)
    : model_(model), prompts_(std::move(prompts)), rules_(rules), store_(store) {
  std::erase_if(prompts_, [](const std::vector<int32_t>& p) { return p.size() < 2; });
  if (prompts_.empty()) {
    fail(ErrorCode::kInvalidArgument, "held-out validation needs prompts of at least 2 tokens");
  }
  exact_.resize(prompts_.size());
  const size_t vocab = static_cast<size_t>(model_.weights().lm_head().rows());
  const size_t budget = exact_logits_bytes.value_or(exact_logits_budget());
  size_t kept_bytes = 0, kept = 0;
  std::vector<bool> keep(prompts_.size(), false);
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const size_t bytes = (prompts_[i].size() - 1) * vocab * sizeof(float);
    if (kept_bytes + bytes > budget) continue;
    keep[i] = true;
    kept_bytes += bytes;
    ++kept;
  }
  if (kept < prompts_.size()) {
    spdlog::info(
        "held-out KL: exact logits of {} of {} prompts kept ({:.1f} GiB); the others re-run "
        "exactly in each measurement",
        kept, prompts_.size(), static_cast<double>(kept_bytes) / (1 << 30));
  }
  std::vector<double> nll(prompts_.size(), 0.0);
  for_each_prompt(prompts_.size(), [&](size_t i) {
    ReferenceDistribution exact = exact_distribution(i);
    for (size_t t = 0; t + 1 < prompts_[i].size(); ++t) {
      const auto row = static_cast<Eigen::Index>(t);
      nll[i] -= log_prob(exact.logits.row(row), exact.rows[t], prompts_[i][t + 1]);
    }
    if (keep[i]) {
      exact_[i] = std::move(exact);
    } else {
      exact_[i].rows = std::move(exact.rows);
    }
  });
  for (size_t i = 0; i < prompts_.size(); ++i) {
    exact_nll_ += nll[i];
    scored_ += static_cast<int64_t>(prompts_[i].size() - 1);
    if (store_ != nullptr)
      prompt_keys_.push_back(prompt_key(*store_, rules_, prompts_[i], exact_[i]));
  }
}

ReferenceDistribution HeldOutKl::exact_distribution(size_t prompt) const {
  return reference_distribution(
      next_token_logits(model_, prompts_[prompt], KvCacheOptions::exact_kv()));
}

int64_t HeldOutKl::n_tokens() const {
  int64_t n = 0;
  for (const auto& p : prompts_) n += static_cast<int64_t>(p.size());
  return n;
}

HeldOutKl::Result HeldOutKl::measure(const std::vector<KvPair>& pairs) const {
  return std::move(measure_all({pairs}).front());
}

std::vector<HeldOutKl::Result> HeldOutKl::measure_all(
    const std::vector<std::vector<KvPair>>& configs) const {
  const KvGeometry geometry = kv_geometry(model_.config());
  std::vector<KvCacheOptions> caches;
  caches.reserve(configs.size());
  for (const std::vector<KvPair>& pairs : configs)
    caches.push_back(rules_.cache_for(pairs, geometry));
  // [config][prompt]
  std::vector<std::vector<PromptScore>> scores(configs.size(),
                                               std::vector<PromptScore>(prompts_.size()));
  // [config][prompt] keys of the store's cells, and whether each is there.
  std::vector<std::vector<uint64_t>> keys(configs.size());
  std::vector<std::vector<bool>> stored(configs.size(), std::vector<bool>(prompts_.size(), false));
  if (store_ != nullptr) {
    size_t found = 0;
    for (size_t c = 0; c < configs.size(); ++c) {
      for (size_t i = 0; i < prompts_.size(); ++i) {
        keys[c].push_back(cell_key(prompt_keys_[i], configs[c]));
        if (const std::optional<PromptScore> cell = store_->find(keys[c].back())) {
          scores[c][i] = *cell;
          stored[c][i] = true;
          ++found;
        }
      }
    }
    spdlog::info("measurements {}: {} of {} cells ({} configurations x {} prompts) already there",
                 store_->path().string(), found, configs.size() * prompts_.size(), configs.size(),
                 prompts_.size());
  }
  for_each_prompt(prompts_.size(), [&](size_t i) {
    size_t to_measure = 0;
    for (size_t c = 0; c < configs.size(); ++c) to_measure += !stored[c][i];
    if (to_measure == 0) return;
    // A prompt whose exact logits were not kept (rows only) re-runs the exact forward, once.
    const bool kept = exact_[i].logits.rows() > 0;
    ReferenceDistribution recomputed;
    if (!kept) recomputed = exact_distribution(i);
    const ReferenceDistribution& exact = kept ? exact_[i] : recomputed;
    for (size_t c = 0; c < configs.size(); ++c) {
      if (stored[c][i]) continue;
      const RowMatrix quantized = next_token_logits(model_, prompts_[i], caches[c]);
      PromptScore& s = scores[c][i];
      for (Eigen::Index t = 0; t < quantized.rows(); ++t) {
        const LogitSummary& p = exact.rows[static_cast<size_t>(t)];
        const LogitSummary q = summarize_logits(quantized.row(t));
        s.kl += next_token_kl(exact.logits.row(t), p, quantized.row(t), q);
        s.agree += p.argmax == q.argmax;
        s.nll -= log_prob(quantized.row(t), q, prompts_[i][static_cast<size_t>(t) + 1]);
      }
      if (store_ != nullptr) store_->add(keys[c][i], s);
    }
  });
  std::vector<Result> results;
  results.reserve(configs.size());
  const double n = static_cast<double>(scored_);
  for (const std::vector<PromptScore>& per_prompt : scores) {
    Result r;
    double kl = 0, nll = 0;
    int64_t agree = 0;
    for (size_t i = 0; i < per_prompt.size(); ++i) {
      const PromptScore& s = per_prompt[i];
      r.kl_sums.push_back(s.kl);
      r.scored_per_prompt.push_back(static_cast<double>(prompts_[i].size() - 1));
      kl += s.kl;
      nll += s.nll;
      agree += s.agree;
    }
    r.scored = scored_;
    r.mean_kl = kl / n;
    r.top1_agreement = static_cast<double>(agree) / n;
    r.ppl = std::exp(nll / n);
    r.ppl_exact = std::exp(exact_nll_ / n);
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace kvplan::search
