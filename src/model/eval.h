// Model-quality evaluation of a KV-cache configuration: perplexity under llama-perplexity's
// protocol and agreement with the exact-KV model (mean KL of next-token distributions, top-1
// agreement).
//
// llama-perplexity's protocol (llama.cpp tools/perplexity): the text is tokenized once with BOS;
// it is cut into n_tokens / n_ctx chunks of n_ctx tokens; each chunk's first token is replaced by
// BOS and the chunk is evaluated independently from an empty cache; only the second half is scored:
// for j in [n_ctx/2, n_ctx - 1), -log p(token[j+1] | logits[j]). PPL = exp(mean).
//
//   kvplan::EvalOptions opt;  opt.kv = kvplan::KvCacheOptions::uniform(pair, n_layers, settings);
//   kvplan::EvalResult r = kvplan::evaluate_perplexity(model, tokens, bos, opt);
//   r.ppl;  r.ppl_exact;  r.mean_kl;  r.top1_agreement;
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/transformer.h"

namespace kvplan {

struct EvalOptions {
  int n_ctx = 256;
  KvCacheOptions kv = KvCacheOptions::exact_kv();
  bool compare_with_exact = true;  // also run exact KV and compute KL / top-1 agreement
  int max_chunks = 0;              // 0 = all
  // Called after each chunk/prompt with (done, total).
  std::function<void(int, int)> progress;
};

struct EvalResult {
  int n_chunks = 0;       // chunks (perplexity) or prompts
  int64_t n_scored = 0;   // next-token predictions scored
  double ppl = 0;         // with the evaluated KV configuration
  double ppl_stderr = 0;  // llama-perplexity's "±": ppl * stderr(mean NLL)
  double ppl_exact = 0;   // exact KV (when compared)
  double mean_kl = 0;     // mean KL(exact || quantized) over scored positions, nats
  double max_kl = 0;
  double top1_agreement = 0;     // fraction of scored positions with the same argmax
  double tokens_per_second = 0;  // evaluated configuration, tokens processed / wall time
  double seconds = 0;
};

// Throws Error(kInvalidArgument) when fewer than n_ctx tokens are given or n_ctx < 4.
EvalResult evaluate_perplexity(const Transformer& model, std::span<const int32_t> tokens,
                               int32_t bos_id, const EvalOptions& options);

// Several KV configurations (options.kv is ignored) over the same chunks under the same protocol;
// the exact-KV run of each chunk is shared when `compare` is set. One result per configuration.
std::vector<EvalResult> evaluate_perplexity_configs(const Transformer& model,
                                                    std::span<const int32_t> tokens, int32_t bos_id,
                                                    const EvalOptions& options,
                                                    const std::vector<KvCacheOptions>& configs,
                                                    bool compare);

// Each prompt (already tokenized, BOS included) evaluated independently from an empty cache; every
// next-token prediction inside the prompt is scored.
EvalResult evaluate_prompts(const Transformer& model,
                            const std::vector<std::vector<int32_t>>& prompts,
                            const EvalOptions& options);

}  // namespace kvplan
