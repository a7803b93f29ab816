// The sensitivity profiler (KVTuner, ICML 2025, §4): one exact-KV reference pass over the
// calibration prompts capturing per layer Q, K (after RoPE), V, the residual-stream input and the
// final logits; then, for every (layer, candidate pair) cell of this shard, the attention-side
// metrics from the captures and dKL by re-running the model from that layer's captured residual
// input with only that layer's KV quantized (metrics.h has the definitions).
//
// Cost and reuse: K̂ per (layer, key format) and V̂ per (layer, value format) are computed once and
// shared by all pairs using them, as are the exact and quantized attention probabilities; e_* use
// every prompt. dKL re-runs layers l..L-1 plus the LM head per cell and prompt, so it uses an
// evenly spaced subset of `kl_prompts` prompts (prompt i*n/kl_prompts for i < kl_prompts; all when
// kl_prompts is 0 or >= n), every position of each.
//
// The work is in two parts: the reference pass (reference_pass.h) and, per layer, the cell runner
// (cell_runner.h); this file sequences them, with the checks, shards, resuming and checkpoints.
//
// Determinism: work items (prompts, cells) run in parallel, each on one thread with serial GEMMs,
// and their sums are reduced in a fixed order, so the numbers do not depend on --threads, on the
// shard layout or on resuming.
//
//   kvplan::ProfileOptions opt;  // default: the whole catalogue, keys and values independently
//   kvplan::Profile p = kvplan::run_profile(model, calibration, opt);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "profile/calibration.h"
#include "profile/profile_data.h"
#include "profile/progress_tracker.h"

namespace kvplan {

struct ProfileOptions {
  // Empty = catalog_side_candidates() (side_candidates.h): every catalogue format for keys and for
  // values independently, dKL measured on the anchors and estimated for the rest.
  std::vector<KvPair> candidates;
  std::vector<bool> dkl_measured;  // [candidate]; empty = every candidate's dKL is measured
  // With no candidates: the formats of the side catalogue (empty = the default catalogue).
  std::vector<Format> formats;
  bool all_dkl = false;  // the default catalogue with every side's dKL measured
  // In layers of several KV heads, also re-run each measured cell with one head alone quantized
  // (ProfileCell dkl_heads: what per-KV-head plans are searched on). 1 + n_kv_heads times the dKL
  // re-runs; off, a per-head search apportions dKL by the heads' shares of o_mse.
  bool per_head_dkl = false;
  QuantSettings settings;
  bool chunk_attends_quantized = true;  // see KvCacheOptions
  int kl_prompts = 8;                   // 0 = all prompts
  int shard_index = 0;                  // 0-based, < shard_count
  int shard_count = 1;
  int threads = 0;          // 0 = every core
  int gpu_device = -1;      // >= 0: attention-side metrics on this GPU (profile/gpu_attention.h)
  std::vector<int> layers;  // profile only these layers (empty = all); the rest stay absent
  std::string tool_version;
  const Profile* resume = nullptr;  // its cells are kept (after an identity check), not recomputed
  std::function<void(const Profile&)> checkpoint;        // after each layer's cells
  std::function<void(const ProfileProgress&)> progress;  // serialized, from any thread
};

// Indices of the dKL prompts among n (see above).
std::vector<size_t> kl_prompt_indices(size_t n_prompts, int kl_prompts);

// Throws Error(kInvalidArgument) for a bad shard, candidate formats that cannot pack this model's
// rows (naming layer and format), an empty calibration set, or a `resume` profile for another
// model, calibration, settings or shard (naming the field).
Profile run_profile(const Transformer& model, const CalibrationSet& calibration,
                    const ProfileOptions& options);

}  // namespace kvplan
