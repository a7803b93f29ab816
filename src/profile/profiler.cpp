#include "profile/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <span>

#include <spdlog/spdlog.h>
#include <Eigen/Core>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "core/hash.h"
#include "core/system_memory.h"
#include "formats/kv_bytes.h"
#include "model/weight_matrix.h"
#include "profile/dkl_estimate.h"
#include "profile/gpu_attention.h"
#include "profile/kv_roundtrip.h"
#include "profile/metrics.h"
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

// Runs body(i) for i in [0, n) on `threads` threads (dynamic schedule); the first exception is
// rethrown after the loop, since none may leave an OpenMP region.
template <typename Body>
void parallel_for(size_t n, int threads, Body&& body) {
  std::exception_ptr error;
  std::mutex mu;
  const long count = static_cast<long>(n);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (long i = 0; i < count; ++i) {
    try {
      body(static_cast<size_t>(i));
    } catch (...) {
      const std::lock_guard lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

struct PromptCapture {
  std::vector<RowMatrix> q, k, v;      // [layer]; empty for layers without pending cells
  std::vector<RowMatrix> layer_input;  // [layer]; dKL prompts only
  ReferenceDistribution reference;     // dKL prompts only: rows [kl_from, T)
  size_t kl_from = 0;
};

// The reference pass takes prompts in batches of about this many tokens: enough rows for the
// products to run at full rate, few enough that a large model's activations stay small.
constexpr size_t kReferenceBatchRows = 2048;

// The dKL re-runs of several cells share one forward while their logits fit in this many bytes:
// larger batches amortize dequantizing and packing each weight tile; the bound keeps a large
// vocabulary's logits (Gemma 3: 262 k) to one or two cells at a time.
constexpr size_t kDklBatchLogitBytes = size_t{512} << 20;

// dKL scores positions [T/2, T): the later half, where the cache holds most of the context (as
// llama-perplexity scores the second half of a chunk); a 1-token prompt scores its only position.
size_t kl_first_row(size_t n_tokens) {
  return n_tokens / 2;
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

Profile profile_header(const Transformer& model, const CalibrationSet& cal, const ProfileOptions& o,
                       const std::vector<KvPair>& candidates,
                       const std::vector<size_t>& kl_prompts) {
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
  p.candidates = candidates;
  p.shard_index = o.shard_index;
  p.shard_count = o.shard_count;
  p.reset_cells();
  return p;
}

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

ProfileCell describe_cell(const ModelConfig& c, int layer, const KvPair& pair,
                          const QuantSettings& settings) {
  ProfileCell cell;
  cell.pair = pair;
  cell.key_bits = pair.key.nominal_bits(c.head_dim);
  cell.value_bits = pair.value.nominal_bits(c.head_dim);
  cell.nominal_bits = pair.nominal_bits(c.head_dim);
  const KvLayerGeometry g{c.n_kv_heads[static_cast<size_t>(layer)], c.head_dim,
                          c.sliding_window[static_cast<size_t>(layer)]};
  const LayerTokenBytes bytes = layer_bytes_per_token(g, pair, settings, layer);
  cell.key_bytes_per_token = bytes.key;
  cell.value_bytes_per_token = bytes.value;
  return cell;
}

// Distinct formats in first-use order, and each candidate's index into them.
std::vector<Format> distinct(const std::vector<Format>& formats, std::vector<size_t>& index_of) {
  std::vector<Format> out;
  index_of.clear();
  for (const Format& f : formats) {
    auto it = std::find(out.begin(), out.end(), f);
    if (it == out.end()) {
      out.push_back(f);
      it = out.end() - 1;
    }
    index_of.push_back(static_cast<size_t>(it - out.begin()));
  }
  return out;
}

// Per-prompt partial sums of one layer's attention-side metrics for its pending cells.
struct LayerPartials {
  std::vector<MetricSum> e_k, e_a;  // [key format]
  std::vector<MetricSum> e_v;       // [value format]
  std::vector<MetricSum> e_o;       // [pending cell]
  std::vector<MetricSum> o_mse;     // [pending cell]
};

LayerPartials attention_partials(const PromptCapture& cap, int l, const ModelConfig& c,
                                 const QuantSettings& settings, const std::vector<Format>& keys,
                                 const std::vector<Format>& values,
                                 const std::vector<std::pair<size_t, size_t>>& cells,
                                 const KvHeadAbsmax& absmax, GpuAttention* gpu) {
  const size_t L = static_cast<size_t>(l);
  const int n_kv = c.n_kv_heads[L];
  const AttentionLayerShape shape{c.n_heads, n_kv, c.head_dim, c.sliding_window[L],
                                  static_cast<float>(c.attn_logit_softcap)};
  const std::vector<RowMatrix> qh = split_heads(cap.q[L], c.n_heads, c.head_dim);
  const std::vector<RowMatrix> kh = split_heads(cap.k[L], n_kv, c.head_dim);
  const std::vector<RowMatrix> vh = split_heads(cap.v[L], n_kv, c.head_dim);
  const int group = c.n_heads / n_kv;
  std::vector<RowMatrix> p_exact(static_cast<size_t>(c.n_heads)), o_exact(p_exact.size());
  for (int h = 0; h < c.n_heads; ++h) {
    const size_t g = static_cast<size_t>(h / group);
    p_exact[static_cast<size_t>(h)] =
        attention_probabilities(qh[static_cast<size_t>(h)], kh[g], shape);
    o_exact[static_cast<size_t>(h)].noalias() = p_exact[static_cast<size_t>(h)] * vh[g];
  }
  LayerPartials out;
  out.e_k.resize(keys.size());
  out.e_a.resize(keys.size());
  out.e_v.resize(values.size());
  out.e_o.resize(cells.size());
  out.o_mse.resize(cells.size());
  std::vector<std::vector<float>> key_scales(keys.size()), value_scales(values.size());
  for (size_t f = 0; f < keys.size(); ++f) key_scales[f] = fp8_head_scales(keys[f], absmax.key);
  for (size_t f = 0; f < values.size(); ++f) {
    value_scales[f] = fp8_head_scales(values[f], absmax.value);
  }
  std::vector<std::vector<RowMatrix>> p_quant(keys.size());
  for (size_t f = 0; f < keys.size(); ++f) {
    const RowMatrix k_hat =
        kv_roundtrip(cap.k[L], KvSide::kKey, keys[f], settings, l, n_kv, c.head_dim, key_scales[f]);
    const std::vector<RowMatrix> khq = split_heads(k_hat, n_kv, c.head_dim);
    for (int g = 0; g < n_kv; ++g) {
      out.e_k[f].add(relative_row_error(kh[static_cast<size_t>(g)], khq[static_cast<size_t>(g)]));
    }
    if (gpu != nullptr) continue;  // probabilities come from the GPU, per cell, below
    p_quant[f].resize(static_cast<size_t>(c.n_heads));
    for (int h = 0; h < c.n_heads; ++h) {
      const size_t g = static_cast<size_t>(h / group);
      p_quant[f][static_cast<size_t>(h)] =
          attention_probabilities(qh[static_cast<size_t>(h)], khq[g], shape);
      out.e_a[f].add(attention_score_error(p_exact[static_cast<size_t>(h)],
                                           p_quant[f][static_cast<size_t>(h)]));
    }
  }
  std::vector<std::vector<RowMatrix>> v_quant(values.size());
  for (size_t f = 0; f < values.size(); ++f) {
    const RowMatrix v_hat = kv_roundtrip(cap.v[L], KvSide::kValue, values[f], settings, l, n_kv,
                                         c.head_dim, value_scales[f]);
    v_quant[f] = split_heads(v_hat, n_kv, c.head_dim);
    for (int g = 0; g < n_kv; ++g) {
      out.e_v[f].add(
          relative_row_error(vh[static_cast<size_t>(g)], v_quant[f][static_cast<size_t>(g)]));
    }
  }
  if (gpu != nullptr) {
    std::vector<bool> scored(keys.size(), false);
    for (size_t i = 0; i < cells.size(); ++i) {
      const auto [kf, vf] = cells[i];
      const GpuAttention::Result r =
          gpu->attend(cap.q[L], cap.k[L], cap.v[L], keys[kf], values[vf], settings, shape,
                      {key_scales[kf], value_scales[vf]});
      if (!scored[kf]) {  // P depends on the key format only: score it from its first cell
        scored[kf] = true;
        for (int h = 0; h < c.n_heads; ++h) {
          out.e_a[kf].add(attention_score_error(p_exact[static_cast<size_t>(h)],
                                                r.probabilities[static_cast<size_t>(h)]));
        }
      }
      const std::vector<RowMatrix> oh = split_heads(r.out, c.n_heads, c.head_dim);
      for (int h = 0; h < c.n_heads; ++h) {
        const RowErrors e = row_errors(o_exact[static_cast<size_t>(h)], oh[static_cast<size_t>(h)]);
        out.e_o[i].add(e.relative);
        out.o_mse[i].add(e.squared);
      }
    }
    return out;
  }
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto [kf, vf] = cells[i];
    for (int h = 0; h < c.n_heads; ++h) {
      const size_t g = static_cast<size_t>(h / group);
      RowMatrix o;
      o.noalias() = p_quant[kf][static_cast<size_t>(h)] * v_quant[vf][g];
      const RowErrors e = row_errors(o_exact[static_cast<size_t>(h)], o);
      out.e_o[i].add(e.relative);
      out.o_mse[i].add(e.squared);
    }
  }
  return out;
}

// Progress bookkeeping shared by the worker threads.
class ProgressTracker {
 public:
  ProgressTracker(const ProfileOptions& o, size_t cells_total, double work_total)
      : options_(o), start_(Clock::now()) {
    state_.cells_total = cells_total;
    state_.work_total = work_total;
  }
  void report(const char* phase, int layer, size_t cells, double work) {
    const std::lock_guard lock(mu_);
    state_.phase = phase;
    state_.layer = layer;
    state_.cells_done += cells;
    state_.work_done += work;
    state_.elapsed_s = seconds_since(start_);
    if (options_.progress) options_.progress(state_);
  }

 private:
  const ProfileOptions& options_;
  Clock::time_point start_;
  std::mutex mu_;
  ProfileProgress state_;
};

}  // namespace

std::vector<KvPair> kvtuner_candidates() {
  std::vector<KvPair> out;
  const char* names[] = {"int8", "int4", "int2"};
  for (const char* k : names) {
    for (const char* v : names) out.push_back({Format::parse(k), Format::parse(v)});
  }
  return out;
}

namespace {

// The non-empty, trimmed items of a comma-separated list.
std::vector<std::string> list_items(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    start = end + 1;
    if (!item.empty()) out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

std::vector<KvPair> parse_candidates(const std::string& text) {
  std::vector<KvPair> out;
  std::set<std::string> seen;
  for (const std::string& item : list_items(text)) {
    const KvPair p = KvPair::parse(item);
    if (p.is_slot()) {
      fail(ErrorCode::kInvalidArgument,
           "--candidates: '{}' is an opaque slot and cannot be profiled", item);
    }
    if (!seen.insert(p.name()).second) {
      fail(ErrorCode::kInvalidArgument, "--candidates: '{}' is listed twice", item);
    }
    out.push_back(p);
  }
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "--candidates: no pairs in '{}'", text);
  return out;
}

std::vector<Format> parse_format_list(const std::string& text) {
  std::vector<Format> out;
  if (text == "all") {
    for (const KvFormatTraits& info : format_table()) {
      if (info.id != FormatId::kF32) out.emplace_back(info.id);
    }
    return out;
  }
  for (const std::string& item : list_items(text)) {
    const Format f = Format::parse(item);
    if (f.is_slot() || f.id() == FormatId::kF32) {
      fail(ErrorCode::kInvalidArgument,
           "--formats: '{}' is not a candidate (expected a quantized or 16-bit format)", item);
    }
    if (std::find(out.begin(), out.end(), f) != out.end()) {
      fail(ErrorCode::kInvalidArgument, "--formats: '{}' is listed twice", item);
    }
    out.push_back(f);
  }
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "--formats: no formats in '{}'", text);
  return out;
}

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
  std::vector<KvPair> candidates = options.candidates;
  std::vector<bool> dkl_measured = options.dkl_measured;
  if (candidates.empty()) {
    SideCandidates side = catalog_side_candidates(
        c, options.settings, {.formats = options.formats, .all_dkl = options.all_dkl});
    for (const std::string& line : side.skipped) spdlog::info("candidates: left out {}", line);
    candidates = std::move(side.candidates);
    dkl_measured = std::move(side.dkl_measured);
  }
  if (!dkl_measured.empty() && dkl_measured.size() != candidates.size()) {
    fail(ErrorCode::kInternal, "{} dkl flags for {} candidates", dkl_measured.size(),
         candidates.size());
  }
  check_candidates(candidates, c, options.settings);
  const std::vector<size_t> kl_prompts =
      kl_prompt_indices(calibration.prompts.size(), options.kl_prompts);
  Profile profile = profile_header(model, calibration, options, candidates, kl_prompts);
  if (std::find(dkl_measured.begin(), dkl_measured.end(), false) != dkl_measured.end()) {
    profile.dkl_measured = dkl_measured;
  }
  // The attention-side metrics go to the GPU when one was chosen, no candidate runs KIVI (its
  // kernels pack per token) and the scores are not soft-capped (the kernels have no cap); the
  // profile records where they ran (GPU probabilities differ from the CPU's in rounding).
  const bool attention_on_gpu = options.gpu_device >= 0 && c.attn_logit_softcap == 0 &&
                                GpuAttention::supports(options.settings, candidates);
  profile.attention_device = attention_on_gpu ? "gpu" : "cpu";
  if (options.resume != nullptr) {
    const Profile& r = *options.resume;
    const std::string diff = profile_identity_mismatch(profile, r);
    if (!diff.empty()) {
      fail(ErrorCode::kInvalidArgument, "--resume: the existing profile is for another run ({})",
           diff);
    }
    if (r.shard_index != profile.shard_index || r.shard_count != profile.shard_count) {
      fail(ErrorCode::kInvalidArgument, "--resume: the existing profile is shard {}/{}, not {}/{}",
           r.shard_index, r.shard_count, profile.shard_index, profile.shard_count);
    }
    profile.cells = r.cells;
  }

  std::vector<bool> wanted(static_cast<size_t>(c.n_layers), options.layers.empty());
  for (const int l : options.layers) {
    if (l < 0 || l >= c.n_layers) {
      fail(ErrorCode::kInvalidArgument, "--layers: layer {} outside [0, {})", l, c.n_layers);
    }
    wanted[static_cast<size_t>(l)] = true;
  }
  // Pending cells per layer.
  const size_t P = candidates.size();
  std::vector<std::vector<size_t>> pending(static_cast<size_t>(c.n_layers));
  size_t cells_total = 0;
  double work_total = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    if (!wanted[static_cast<size_t>(l)]) continue;
    for (size_t p = 0; p < P; ++p) {
      if (shard_of_cell(l, p, P, options.shard_count) != options.shard_index) continue;
      if (profile.cells[static_cast<size_t>(l)][p]) continue;
      pending[static_cast<size_t>(l)].push_back(p);
      ++cells_total;
      // dKL re-runs layers l..L-1 plus the head (about one layer's worth on small models).
      if (profile.measures_dkl(p)) {
        work_total += static_cast<double>(kl_prompts.size()) * (c.n_layers - l + 1);
      }
    }
  }
  const int threads = options.threads > 0 ? options.threads :
#ifdef _OPENMP
                                          omp_get_num_procs();
#else
                                          1;
#endif
  profile.timings = {{"threads", threads}};
  if (cells_total == 0) {
    if (options.resume != nullptr) profile.kv_absmax = options.resume->kv_absmax;
    return profile;
  }

  std::unique_ptr<GpuAttention> gpu;
  if (attention_on_gpu) {
    gpu = std::make_unique<GpuAttention>(options.gpu_device);
  } else if (options.gpu_device >= 0) {
    spdlog::info(
        "profile: KIVI's per-channel keys are packed on the CPU; attention metrics run "
        "on the CPU");
  }
  const char* attention_device = gpu ? "gpu" : "cpu";

  // Eigen single-threaded for the profiler's lifetime: the parallelism is over work items and
  // tiles, so every product runs the same serial code whatever the thread count.
  const SerialEigenScope serial;
  const OmpThreadsForRun team(threads);
  const size_t n_prompts = calibration.prompts.size();
  work_total += static_cast<double>(n_prompts) * (c.n_layers + 1);  // the reference pass
  ProgressTracker tracker(options, cells_total, work_total);

  // 1. Reference pass (exact KV): prompts go through the model in batches of about
  // kReferenceBatchRows tokens (threaded products; each prompt's rows get the bits they get alone).
  std::vector<bool> is_kl(n_prompts, false);
  for (const size_t i : kl_prompts) is_kl[i] = true;
  std::vector<PromptCapture> captures(n_prompts);
  std::vector<std::vector<KvHeadAbsmax>> prompt_absmax(n_prompts);
  const auto ref_start = Clock::now();
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
    parallel_for(n, threads, [&](size_t b) {
      const size_t i = first + b;
      ForwardCapture& cap = caps[b];
      PromptCapture& out = captures[i];
      const size_t L = static_cast<size_t>(c.n_layers);
      for (size_t l = 0; l < L; ++l) {  // every layer's, so that any plan can take FP8 scales
        prompt_absmax[i].push_back({head_absmax(cap.k[l], c.n_kv_heads[l], c.head_dim),
                                    head_absmax(cap.v[l], c.n_kv_heads[l], c.head_dim)});
      }
      out.q.resize(L);
      out.k.resize(L);
      out.v.resize(L);
      if (is_kl[i]) out.layer_input.resize(L);
      for (size_t l = 0; l < L; ++l) {
        if (pending[l].empty()) continue;
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
  keep_reference_probabilities(captures, kl_prompts, threads);
  const double reference_s = seconds_since(ref_start);
  profile.kv_absmax = prompt_absmax[0];
  for (size_t i = 1; i < n_prompts; ++i) {
    for (size_t l = 0; l < profile.kv_absmax.size(); ++l) {
      KvHeadAbsmax& m = profile.kv_absmax[l];
      for (size_t h = 0; h < m.key.size(); ++h) {
        m.key[h] = std::max(m.key[h], prompt_absmax[i][l].key[h]);
        m.value[h] = std::max(m.value[h], prompt_absmax[i][l].value[h]);
      }
    }
  }

  // 2. Per layer: attention-side metrics over every prompt, then dKL per (cell, dKL prompt).
  // A dKL batch takes as many cells as keep its logits under kDklBatchLogitBytes.
  size_t kl_rows = 0;
  for (const size_t i : kl_prompts) kl_rows += captures[i].reference.rows.size();
  const size_t logit_bytes_per_cell = kl_rows * static_cast<size_t>(c.vocab_size) * sizeof(float);
  const size_t cells_per_batch =
      std::max<size_t>(1, kDklBatchLogitBytes / std::max<size_t>(1, logit_bytes_per_cell));
  double metrics_s = 0, dkl_s = 0;
  size_t cells_done = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::vector<size_t>& cells = pending[static_cast<size_t>(l)];
    if (cells.empty()) continue;
    const auto layer_start = Clock::now();
    std::vector<Format> key_list, value_list;
    for (const size_t p : cells) {
      key_list.push_back(candidates[p].key);
      value_list.push_back(candidates[p].value);
    }
    std::vector<size_t> key_of, value_of;
    const std::vector<Format> keys = distinct(key_list, key_of);
    const std::vector<Format> values = distinct(value_list, value_of);
    std::vector<std::pair<size_t, size_t>> cell_formats;
    for (size_t i = 0; i < cells.size(); ++i) cell_formats.emplace_back(key_of[i], value_of[i]);

    std::vector<LayerPartials> partials(n_prompts);
    parallel_for(n_prompts, threads, [&](size_t i) {
      partials[i] =
          attention_partials(captures[i], l, c, options.settings, keys, values, cell_formats,
                             profile.kv_absmax[static_cast<size_t>(l)], gpu.get());
    });
    metrics_s += seconds_since(layer_start);

    const auto dkl_start = Clock::now();
    const size_t K = kl_prompts.size();
    std::vector<size_t> rerun;  // pending cells (indices into `cells`) whose dKL is measured
    for (size_t i = 0; i < cells.size(); ++i) {
      if (profile.measures_dkl(cells[i])) rerun.push_back(i);
    }
    tracker.report("layers", l, cells.size() - rerun.size(), 0);
    std::vector<MetricSum> kl(cells.size() * K);
    // Cells go through the model together, each dKL prompt of each cell one sequence of the batch
    // (batched products, threaded inside; every sequence's logits are the bits it gets alone),
    // cells_per_batch at a time.
    for (size_t b0 = 0; b0 < rerun.size(); b0 += cells_per_batch) {
      const std::span<const size_t> group(rerun.data() + b0,
                                          std::min(cells_per_batch, rerun.size() - b0));
      std::vector<KvCache> caches;
      caches.reserve(group.size() * K);
      std::vector<Transformer::BatchSequence> batch;
      for (const size_t ci : group) {
        std::vector<KvPair> pairs(static_cast<size_t>(c.n_layers),
                                  KvPair::uniform(Format(FormatId::kF32)));
        pairs[static_cast<size_t>(l)] = candidates[cells[ci]];
        KvCacheOptions kv = KvCacheOptions::per_layer(std::move(pairs), options.settings);
        kv.chunk_attends_quantized = options.chunk_attends_quantized;
        kv.fp8_scales.resize(static_cast<size_t>(c.n_layers));
        kv.fp8_scales[static_cast<size_t>(l)] = profile.fp8_scales(l, candidates[cells[ci]]);
        for (size_t k = 0; k < K; ++k) {
          const PromptCapture& cap = captures[kl_prompts[k]];
          caches.emplace_back(c, kv);
          batch.push_back({&cap.layer_input[static_cast<size_t>(l)], &caches.back(), cap.kl_from});
        }
      }
      // Sequence j's logits start at row first_row[j].
      std::vector<Eigen::Index> first_row(batch.size() + 1, 0);
      for (size_t j = 0; j < batch.size(); ++j) {
        first_row[j + 1] = first_row[j] + batch[j].layer_input->rows() -
                           static_cast<Eigen::Index>(batch[j].logits_from_row);
      }
      const RowMatrix logits = model.forward_batch_from_layer(l, batch);
      parallel_for(batch.size(), threads, [&](size_t j) {
        const RowMatrix own = logits.middleRows(first_row[j], first_row[j + 1] - first_row[j]);
        kl[group[j / K] * K + j % K] = kl_sum(captures[kl_prompts[j % K]].reference, own);
      });
      for (size_t g = 0; g < group.size(); ++g) {
        tracker.report("layers", l, 1, static_cast<double>(K) * (c.n_layers - l + 1));
      }
    }
    dkl_s += seconds_since(dkl_start);

    for (size_t i = 0; i < cells.size(); ++i) {
      MetricSum ek, ev, ea, eo, omse, dkl;
      for (size_t pr = 0; pr < n_prompts; ++pr) {
        ek.add(partials[pr].e_k[key_of[i]]);
        ev.add(partials[pr].e_v[value_of[i]]);
        ea.add(partials[pr].e_a[key_of[i]]);
        eo.add(partials[pr].e_o[i]);
        omse.add(partials[pr].o_mse[i]);
      }
      for (size_t k = 0; k < K; ++k) dkl.add(kl[i * K + k]);
      ProfileCell cell = describe_cell(c, l, candidates[cells[i]], options.settings);
      cell.metrics = {ek.mean(),
                      ev.mean(),
                      ea.mean(),
                      eo.mean(),
                      dkl.mean(),
                      omse.mean(),
                      profile.measures_dkl(cells[i])};
      profile.cells[static_cast<size_t>(l)][cells[i]] = cell;
      ++cells_done;
    }
    for (PromptCapture& cap : captures) {  // this layer's captures are no longer needed
      cap.q[static_cast<size_t>(l)] = RowMatrix();
      cap.k[static_cast<size_t>(l)] = RowMatrix();
      cap.v[static_cast<size_t>(l)] = RowMatrix();
      if (!cap.layer_input.empty()) cap.layer_input[static_cast<size_t>(l)] = RowMatrix();
    }
    const double total_s = seconds_since(start);
    profile.timings = {{"threads", threads},
                       {"attention_device", attention_device},
                       {"cells_computed", cells_done},
                       {"reference_s", reference_s},
                       {"metrics_s", metrics_s},
                       {"dkl_s", dkl_s},
                       {"total_s", total_s}};
    estimate_unmeasured_dkl(profile);
    if (options.checkpoint) options.checkpoint(profile);
  }
  const double total_s = seconds_since(start);
  profile.timings = {{"threads", threads},
                     {"attention_device", attention_device},
                     {"cells_computed", cells_total},
                     {"reference_s", reference_s},
                     {"metrics_s", metrics_s},
                     {"dkl_s", dkl_s},
                     {"total_s", total_s},
                     {"seconds_per_cell", total_s / static_cast<double>(cells_total)}};
  return profile;
}

}  // namespace kvplan
