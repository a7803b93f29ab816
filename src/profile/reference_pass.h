// The profiler's reference pass (profiler.h): every calibration prompt through the model once with
// exact KV, keeping what the cell runner (cell_runner.h) measures every (layer, candidate) cell
// against: per layer Q, K (after RoPE) and V; for the dKL prompts each layer's residual-stream
// input and the reference distribution of the scored rows; and the largest |K| and |V| per KV head
// over every prompt (every layer, so that any plan can take FP8 scales).
//
//   ReferenceCaptures ref = run_reference_pass(model, calibration,
//                                              {.kl_prompts = kl, .keep_layer = pending, .threads =
//                                              8}, tracker);
//   ref.prompts[i].k[layer];  // [T, n_kv_heads * head_dim]
#pragma once

#include <cstddef>
#include <vector>

#include "formats/fp8_scales.h"
#include "model/next_token_kl.h"
#include "model/transformer.h"
#include "profile/calibration.h"
#include "profile/progress_tracker.h"

namespace kvplan {

// dKL scores positions [T/2, T): the later half, where the cache holds most of the context (as
// llama-perplexity scores the second half of a chunk); a 1-token prompt scores its only position.
inline size_t kl_first_row(size_t n_tokens) {
  return n_tokens / 2;
}

struct PromptCapture {
  std::vector<RowMatrix> q, k, v;      // [layer]; empty for layers not kept
  std::vector<RowMatrix> layer_input;  // [layer]; dKL prompts only
  ReferenceDistribution reference;     // dKL prompts only: rows [kl_from, T)
  size_t kl_from = 0;

  // Frees `layer`'s matrices once its cells are done.
  void drop_layer(int layer);
};

struct ReferenceCaptures {
  std::vector<PromptCapture> prompts;   // [prompt]
  std::vector<KvHeadAbsmax> kv_absmax;  // [layer] over every prompt
};

struct ReferencePassOptions {
  std::vector<size_t> kl_prompts;  // indices of the dKL prompts (kl_prompt_indices)
  std::vector<bool> keep_layer;    // [layer] whether its captures are kept (it has pending cells)
  int threads = 1;
};

// Reports phase "reference" to `tracker`, one layer-forward per layer and the head per prompt.
ReferenceCaptures run_reference_pass(const Transformer& model, const CalibrationSet& calibration,
                                     const ReferencePassOptions& options, ProgressTracker& tracker);

}  // namespace kvplan
