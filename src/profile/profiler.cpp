#include "profile/profiler.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>

#include <spdlog/spdlog.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/build_record.h"
#include "core/error.h"
#include "core/hash.h"
#include "formats/kv_bytes.h"
#include "model/weight_matrix.h"
#include "profile/cell_runner.h"
#include "profile/dkl_estimate.h"
#include "profile/gpu_attention.h"
#include "profile/progress_tracker.h"
#include "profile/reference_pass.h"
#include "profile/side_candidates.h"

namespace kvplan {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// OpenMP's default team (the threaded matrix products of the batched dKL forwards) is --threads
// for the profiler's lifetime.
class OmpThreadsForRun {
 public:
  explicit OmpThreadsForRun(int threads) {
#ifdef _OPENMP
    saved_ = omp_get_max_threads();
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
  }
  ~OmpThreadsForRun() {
#ifdef _OPENMP
    omp_set_num_threads(saved_);
#endif
  }
  OmpThreadsForRun(const OmpThreadsForRun&) = delete;
  OmpThreadsForRun& operator=(const OmpThreadsForRun&) = delete;

 private:
  int saved_ = 1;
};

int thread_count(int requested) {
  if (requested > 0) return requested;
#ifdef _OPENMP
  return omp_get_num_procs();
#else
  return 1;
#endif
}

void check_run_options(const ProfileOptions& options, const CalibrationSet& calibration) {
  if (options.shard_count < 1 || options.shard_index < 0 ||
      options.shard_index >= options.shard_count) {
    fail(ErrorCode::kInvalidArgument, "--shard {}/{}: expected i/n with 0 <= i < n",
         options.shard_index, options.shard_count);
  }
  if (calibration.prompts.empty()) {
    fail(ErrorCode::kInvalidArgument, "{}: no calibration prompts", calibration.source);
  }
  if (options.kl_prompts < 0) {
    fail(ErrorCode::kInvalidArgument, "--kl-prompts {}: expected >= 0", options.kl_prompts);
  }
  options.settings.validate();
}

void check_candidates(const std::vector<KvPair>& candidates, const ModelConfig& c,
                      const QuantSettings& settings) {
  std::set<std::string> seen;
  for (const KvPair& p : candidates) {
    if (p.is_slot()) {
      fail(ErrorCode::kInvalidArgument,
           "candidate '{}': an opaque slot cannot be profiled (kvplan never decodes it)", p.name());
    }
    if (!seen.insert(p.name()).second) {
      fail(ErrorCode::kInvalidArgument, "candidate '{}' is listed twice", p.name());
    }
    for (int l = 0; l < c.n_layers; ++l) {
      // Sizes (and so packability) of both sides, per layer, named in the error.
      (void)layer_bytes_per_token({c.n_kv_heads[static_cast<size_t>(l)], c.head_dim, 0}, p,
                                  settings, l);
      LayerKvCache probe(l, {c.n_kv_heads[static_cast<size_t>(l)], c.head_dim, 0}, false, p,
                         settings);
    }
  }
}

struct RunCandidates {
  std::vector<KvPair> pairs;
  std::vector<bool> dkl_measured;  // [pair]; empty = every pair's dKL is measured
};

// The candidates given, or the side catalogue's; checked against the model.
RunCandidates resolve_candidates(const ModelConfig& c, const ProfileOptions& options) {
  RunCandidates out{options.candidates, options.dkl_measured};
  if (out.pairs.empty()) {
    SideCandidates side = catalog_side_candidates(
        c, options.settings, {.formats = options.formats, .all_dkl = options.all_dkl});
    for (const std::string& line : side.skipped) spdlog::info("candidates: left out {}", line);
    out.pairs = std::move(side.candidates);
    out.dkl_measured = std::move(side.dkl_measured);
  }
  if (!out.dkl_measured.empty() && out.dkl_measured.size() != out.pairs.size()) {
    fail(ErrorCode::kInternal, "{} dkl flags for {} candidates", out.dkl_measured.size(),
         out.pairs.size());
  }
  check_candidates(out.pairs, c, options.settings);
  return out;
}

Profile profile_header(const Transformer& model, const CalibrationSet& cal, const ProfileOptions& o,
                       const RunCandidates& candidates, const std::vector<size_t>& kl_prompts) {
  Profile p;
  p.tool_version = o.tool_version;
  p.model = kv_model(model.weights());
  p.calibration.source = std::filesystem::path(cal.source).filename().string();
  p.calibration.hash = hash_hex(cal.hash);
  p.calibration.prompts = static_cast<int>(cal.prompts.size());
  p.calibration.tokens = cal.n_tokens;
  p.calibration.max_tokens = cal.limit;
  p.calibration.truncated = cal.n_truncated;
  p.calibration.kl_prompts = static_cast<int>(kl_prompts.size());
  for (const size_t i : kl_prompts) {
    const size_t T = cal.prompts[i].size();
    p.calibration.kl_tokens += static_cast<int64_t>(T - kl_first_row(T));
  }
  p.quantization = o.settings;
  p.chunk_attends_quantized = o.chunk_attends_quantized;
  p.candidates = candidates.pairs;
  const std::vector<bool>& measured = candidates.dkl_measured;
  if (std::find(measured.begin(), measured.end(), false) != measured.end()) {
    p.dkl_measured = measured;
  }
  p.shard_index = o.shard_index;
  p.shard_count = o.shard_count;
  p.reset_cells();
  return p;
}

// Keeps `resume`'s cells after checking that it is the same experiment and shard.
void keep_resumed_cells(Profile& profile, const Profile& resume, bool per_head_dkl) {
  const std::string diff = profile_identity_mismatch(profile, resume);
  if (!diff.empty()) {
    fail(ErrorCode::kInvalidArgument, "--resume: the existing profile is for another run ({})",
         diff);
  }
  if (const std::optional<bool> resumed = resume.per_head_dkl();
      resumed && *resumed != per_head_dkl) {
    fail(ErrorCode::kInvalidArgument,
         "--resume: the existing profile was made {} --per-head-dkl and this run is {} it",
         *resumed ? "with" : "without", per_head_dkl ? "with" : "without");
  }
  if (resume.shard_index != profile.shard_index || resume.shard_count != profile.shard_count) {
    fail(ErrorCode::kInvalidArgument, "--resume: the existing profile is shard {}/{}, not {}/{}",
         resume.shard_index, resume.shard_count, profile.shard_index, profile.shard_count);
  }
  profile.cells = resume.cells;
}

struct PendingCells {
  std::vector<std::vector<size_t>> by_layer;  // [layer] candidates this run computes
  size_t total = 0;
  double dkl_work = 0;  // their dKL re-runs, in layer-forward equivalents (for the ETA)
};

// The cells of the wanted layers in this shard that `profile` does not hold yet.
PendingCells pending_cells(const Profile& profile, const ProfileOptions& options, int n_layers,
                           size_t n_kl_prompts) {
  std::vector<bool> wanted(static_cast<size_t>(n_layers), options.layers.empty());
  for (const int l : options.layers) {
    if (l < 0 || l >= n_layers) {
      fail(ErrorCode::kInvalidArgument, "--layers: layer {} outside [0, {})", l, n_layers);
    }
    wanted[static_cast<size_t>(l)] = true;
  }
  const size_t P = profile.candidates.size();
  PendingCells out;
  out.by_layer.resize(static_cast<size_t>(n_layers));
  for (int l = 0; l < n_layers; ++l) {
    if (!wanted[static_cast<size_t>(l)]) continue;
    for (size_t p = 0; p < P; ++p) {
      if (shard_of_cell(l, p, P, options.shard_count) != options.shard_index) continue;
      if (profile.cells[static_cast<size_t>(l)][p]) continue;
      out.by_layer[static_cast<size_t>(l)].push_back(p);
      ++out.total;
      // dKL re-runs layers l..L-1 plus the head (about one layer's worth on small models): once
      // with the layer quantized and, with per_head_dkl, once per KV head.
      if (profile.measures_dkl(p)) {
        const int n_kv = profile.model.geometry.layers[static_cast<size_t>(l)].n_kv_heads;
        out.dkl_work +=
            static_cast<double>(n_kl_prompts) * (n_layers - l + 1) * (n_kv > 1 ? 1 + n_kv : 1);
      }
    }
  }
  return out;
}

// The GPU the attention-side metrics run on, or none (the CPU).
std::unique_ptr<GpuAttention> attention_gpu(bool attention_on_gpu, int gpu_device) {
  if (attention_on_gpu) return std::make_unique<GpuAttention>(gpu_device);
  if (gpu_device >= 0) {
    spdlog::info(
        "profile: KIVI's per-channel keys are packed on the CPU; attention metrics run "
        "on the CPU");
  }
  return nullptr;
}

ProfileTimings run_timings(int threads, const char* attention_device, size_t cells_computed,
                           double reference_s, const CellRunner& runner, double total_s) {
  ProfileTimings t;
  t.threads = threads;
  t.build = this_build();
  t.attention_device = attention_device;
  t.cells_computed = static_cast<int64_t>(cells_computed);
  t.reference_s = reference_s;
  t.metrics_s = runner.metrics_s();
  t.dkl_s = runner.dkl_s();
  t.total_s = total_s;
  return t;
}

}  // namespace

std::vector<size_t> kl_prompt_indices(size_t n_prompts, int kl_prompts) {
  std::vector<size_t> out;
  const size_t k =
      kl_prompts <= 0 ? n_prompts : std::min(n_prompts, static_cast<size_t>(kl_prompts));
  for (size_t i = 0; i < k; ++i) out.push_back(i * n_prompts / k);
  return out;
}

Profile run_profile(const Transformer& model, const CalibrationSet& calibration,
                    const ProfileOptions& options) {
  const auto start = Clock::now();
  const ModelConfig& c = model.config();
  check_run_options(options, calibration);
  const RunCandidates candidates = resolve_candidates(c, options);
  const std::vector<size_t> kl_prompts =
      kl_prompt_indices(calibration.prompts.size(), options.kl_prompts);
  Profile profile = profile_header(model, calibration, options, candidates, kl_prompts);
  // The attention-side metrics go to the GPU when one was chosen, no candidate runs KIVI (its
  // kernels pack per token) and the scores are not soft-capped (the kernels have no cap); the
  // profile records where they ran (GPU probabilities differ from the CPU's in rounding).
  const bool attention_on_gpu = options.gpu_device >= 0 && c.attn_logit_softcap == 0 &&
                                GpuAttention::supports(options.settings, candidates.pairs);
  profile.attention_device = attention_on_gpu ? "gpu" : "cpu";
  if (options.resume != nullptr) {
    keep_resumed_cells(profile, *options.resume, options.per_head_dkl);
  }
  const PendingCells pending = pending_cells(profile, options, c.n_layers, kl_prompts.size());
  const int threads = thread_count(options.threads);
  profile.timings.threads = threads;
  profile.timings.build = this_build();
  if (pending.total == 0) {
    if (options.resume != nullptr) profile.kv_absmax = options.resume->kv_absmax;
    return profile;
  }

  const std::unique_ptr<GpuAttention> gpu = attention_gpu(attention_on_gpu, options.gpu_device);
  const char* attention_device = gpu ? "gpu" : "cpu";

  // Eigen single-threaded for the profiler's lifetime: the parallelism is over work items and
  // tiles, so every product runs the same serial code whatever the thread count.
  const SerialEigenScope serial;
  const OmpThreadsForRun team(threads);
  const double reference_work = static_cast<double>(calibration.prompts.size()) * (c.n_layers + 1);
  ProgressTracker tracker(options.progress, pending.total, pending.dkl_work + reference_work);

  const auto reference_start = Clock::now();
  std::vector<bool> keep_layer;
  for (const std::vector<size_t>& cells : pending.by_layer) keep_layer.push_back(!cells.empty());
  ReferenceCaptures reference = run_reference_pass(
      model, calibration, {.kl_prompts = kl_prompts, .keep_layer = keep_layer, .threads = threads},
      tracker);
  const double reference_s = seconds_since(reference_start);
  profile.kv_absmax = reference.kv_absmax;

  CellRunner runner(model,
                    {.settings = options.settings,
                     .chunk_attends_quantized = options.chunk_attends_quantized,
                     .per_head_dkl = options.per_head_dkl,
                     .threads = threads,
                     .gpu = gpu.get()},
                    reference, kl_prompts, tracker);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::vector<size_t>& cells = pending.by_layer[static_cast<size_t>(l)];
    if (cells.empty()) continue;
    runner.run_layer(l, cells, profile);
    profile.timings = run_timings(threads, attention_device, runner.cells_done(), reference_s,
                                  runner, seconds_since(start));
    estimate_unmeasured_dkl(profile);
    if (options.checkpoint) options.checkpoint(profile);
  }
  const double total_s = seconds_since(start);
  profile.timings =
      run_timings(threads, attention_device, pending.total, reference_s, runner, total_s);
  profile.timings.seconds_per_cell = total_s / static_cast<double>(pending.total);
  return profile;
}

}  // namespace kvplan
