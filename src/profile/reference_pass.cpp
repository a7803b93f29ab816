#include "profile/reference_pass.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include <spdlog/spdlog.h>

#include "core/system_memory.h"
#include "model/weight_matrix.h"
#include "profile/parallel_for.h"

namespace kvplan {
namespace {

// The reference pass takes prompts in batches of about this many tokens: enough rows for the
// products to run at full rate, few enough that a large model's activations stay small.
constexpr size_t kReferenceBatchRows = 2048;

// Largest |x| of each KV head's columns of a captured [T, n_kv_heads * head_dim] K or V.
std::vector<float> head_absmax(const RowMatrix& rows, int n_kv_heads, int head_dim) {
  std::vector<float> out(static_cast<size_t>(n_kv_heads), 0.0f);
  if (rows.size() == 0) return out;
  for (int h = 0; h < n_kv_heads; ++h) {
    out[static_cast<size_t>(h)] =
        rows.middleCols(static_cast<Eigen::Index>(h) * head_dim, head_dim).cwiseAbs().maxCoeff();
  }
  return out;
}

// Every cell's dKL compares against the same reference rows: their probabilities are computed
// once and kept when they take at most a sixteenth of the machine's memory (otherwise each
// comparison recomputes them; the bits are the same either way).
void keep_reference_probabilities(std::vector<PromptCapture>& captures,
                                  const std::vector<size_t>& kl_prompts, int threads) {
  uint64_t bytes = 0;
  for (const size_t i : kl_prompts) bytes += captures[i].reference.probabilities_bytes();
  const std::optional<uint64_t> physical = physical_memory_bytes();
  if (!physical || bytes > *physical / 16) {
    spdlog::info("profile: reference probabilities ({} MiB) recomputed per comparison",
                 bytes >> 20);
    return;
  }
  parallel_for(kl_prompts.size(), threads,
               [&](size_t k) { captures[kl_prompts[k]].reference.keep_probabilities(); });
}

// The per-head maxima over every prompt, from each prompt's.
std::vector<KvHeadAbsmax> max_over_prompts(const std::vector<std::vector<KvHeadAbsmax>>& prompts) {
  std::vector<KvHeadAbsmax> out = prompts[0];
  for (size_t i = 1; i < prompts.size(); ++i) {
    for (size_t l = 0; l < out.size(); ++l) {
      KvHeadAbsmax& m = out[l];
      for (size_t h = 0; h < m.key.size(); ++h) {
        m.key[h] = std::max(m.key[h], prompts[i][l].key[h]);
        m.value[h] = std::max(m.value[h], prompts[i][l].value[h]);
      }
    }
  }
  return out;
}

}  // namespace

void PromptCapture::drop_layer(int layer) {
  const size_t l = static_cast<size_t>(layer);
  q[l] = RowMatrix();
  k[l] = RowMatrix();
  v[l] = RowMatrix();
  if (!layer_input.empty()) layer_input[l] = RowMatrix();
}

ReferenceCaptures run_reference_pass(const Transformer& model, const CalibrationSet& calibration,
                                     const ReferencePassOptions& options,
                                     ProgressTracker& tracker) {
  const ModelConfig& c = model.config();
  const size_t n_prompts = calibration.prompts.size();
  std::vector<bool> is_kl(n_prompts, false);
  for (const size_t i : options.kl_prompts) is_kl[i] = true;
  std::vector<PromptCapture> captures(n_prompts);
  std::vector<std::vector<KvHeadAbsmax>> prompt_absmax(n_prompts);
  // Prompts go through the model in batches of about kReferenceBatchRows tokens (threaded
  // products; each prompt's rows get the bits they get alone).
  for (size_t first = 0; first < n_prompts;) {
    size_t end = first, batch_rows = 0;
    while (end < n_prompts &&
           (end == first || batch_rows + calibration.prompts[end].size() <= kReferenceBatchRows)) {
      batch_rows += calibration.prompts[end++].size();
    }
    const size_t n = end - first;
    std::vector<RowMatrix> inputs(n);
    std::vector<KvCache> caches;
    caches.reserve(n);
    std::vector<ForwardCapture> caps(n);
    std::vector<Transformer::BatchSequence> batch;
    for (size_t b = 0; b < n; ++b) {
      const size_t i = first + b;
      inputs[b] = model.embed(calibration.prompts[i]);
      caches.emplace_back(c, KvCacheOptions::exact_kv());
      caps[b].residual_input = is_kl[i];
      // Only the dKL prompts' second halves are compared: the other rows never go through the
      // output matrix (the largest product). At least kMinRowsForSameBits of them, so that each
      // row gets the bits the batched re-runs give it.
      const size_t T = calibration.prompts[i].size();
      if (is_kl[i]) captures[i].kl_from = kl_first_row(T);
      const size_t from =
          is_kl[i] ? std::min(captures[i].kl_from, T - std::min<size_t>(T, kMinRowsForSameBits))
                   : T - 1;
      batch.push_back({&inputs[b], &caches.back(), from, &caps[b]});
    }
    (void)model.forward_batch_from_layer(0, batch);
    parallel_for(n, options.threads, [&](size_t b) {
      const size_t i = first + b;
      ForwardCapture& cap = caps[b];
      PromptCapture& out = captures[i];
      const size_t L = static_cast<size_t>(c.n_layers);
      for (size_t l = 0; l < L; ++l) {
        prompt_absmax[i].push_back({head_absmax(cap.k[l], c.n_kv_heads[l], c.head_dim),
                                    head_absmax(cap.v[l], c.n_kv_heads[l], c.head_dim)});
      }
      out.q.resize(L);
      out.k.resize(L);
      out.v.resize(L);
      if (is_kl[i]) out.layer_input.resize(L);
      for (size_t l = 0; l < L; ++l) {
        if (!options.keep_layer[l]) continue;
        out.q[l] = std::move(cap.q[l]);
        out.k[l] = std::move(cap.k[l]);
        out.v[l] = std::move(cap.v[l]);
        if (is_kl[i]) out.layer_input[l] = std::move(cap.layer_input[l]);
      }
      if (is_kl[i]) {
        out.reference = reference_distribution(cap.logits.bottomRows(
            static_cast<Eigen::Index>(calibration.prompts[i].size() - out.kl_from)));
      }
      cap = ForwardCapture();
      tracker.report("reference", -1, 0, c.n_layers + 1);
    });
    first = end;
  }
  keep_reference_probabilities(captures, options.kl_prompts, options.threads);
  return {std::move(captures), max_over_prompts(prompt_absmax)};
}

}  // namespace kvplan
