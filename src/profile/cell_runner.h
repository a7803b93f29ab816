// The profiler's per-layer work (profiler.h): for every pending (layer, candidate) cell of a
// layer, the attention-side metrics e_k, e_v, e_a, e_o, o_mse over every prompt from the reference
// captures (reference_pass.h), and dKL by re-running the model from the layer's captured residual
// input with only that layer's KV quantized (metrics.h has the definitions) — and, with
// per_head_dkl in a layer of several KV heads, with only one head of it quantized, for each head.
//
// K̂ per key format and V̂ per value format are computed once per prompt and shared by the cells
// that use them, as are the exact and quantized attention probabilities. The dKL re-runs of
// several cells share one batched forward while their logits fit in kDklBatchLogitBytes.
//
//   CellRunner runner(model, {.settings = s, .threads = 8}, reference, kl_prompts, tracker);
//   for (int l : layers) runner.run_layer(l, pending[l], profile);  // fills profile.cells[l]
#pragma once

#include <cstddef>
#include <vector>

#include "formats/quant_settings.h"
#include "model/transformer.h"
#include "profile/gpu_attention.h"
#include "profile/profile_data.h"
#include "profile/progress_tracker.h"
#include "profile/reference_pass.h"

namespace kvplan {

struct CellRunOptions {
  QuantSettings settings;
  bool chunk_attends_quantized = true;  // see KvCacheOptions
  bool per_head_dkl = false;            // see ProfileOptions
  int threads = 1;
  GpuAttention* gpu = nullptr;  // attention-side metrics on this GPU; null: on the CPU
};

class CellRunner {
 public:
  // `reference` and `tracker` must outlive the runner; `kl_prompts` are the dKL prompts' indices.
  CellRunner(const Transformer& model, const CellRunOptions& options, ReferenceCaptures& reference,
             std::vector<size_t> kl_prompts, ProgressTracker& tracker);

  // Computes the cells `candidates` (indices into profile.candidates) of `layer` into
  // profile.cells[layer], with the FP8 scales of profile.kv_absmax, then frees the layer's
  // captures. Reports phase "layers" to the tracker.
  void run_layer(int layer, const std::vector<size_t>& candidates, Profile& profile);

  [[nodiscard]] size_t cells_done() const { return cells_done_; }
  [[nodiscard]] double metrics_s() const { return metrics_s_; }  // attention-side metrics
  [[nodiscard]] double dkl_s() const { return dkl_s_; }          // dKL re-runs

 private:
  // dKL of each measured cell (index into `candidates`) and dKL prompt: kl [cell * K + prompt];
  // with per_head_dkl in a layer of several KV heads also with one head quantized, the others
  // exact:
  // kl_heads [(cell * n_kv + head) * K + prompt].
  struct DklSums {
    std::vector<MetricSum> kl, kl_heads;
  };
  DklSums measure_dkl(int layer, const std::vector<size_t>& candidates,
                      const std::vector<size_t>& measured, const Profile& profile);

  const Transformer& model_;
  CellRunOptions options_;
  ReferenceCaptures& reference_;
  std::vector<size_t> kl_prompts_;
  ProgressTracker& tracker_;
  size_t cells_per_batch_ = 1;
  size_t cells_done_ = 0;
  double metrics_s_ = 0, dkl_s_ = 0;
};

}  // namespace kvplan
