#include "profile/cell_runner.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <utility>

#include "formats/kv_bytes.h"
#include "profile/kv_roundtrip.h"
#include "profile/metrics.h"
#include "profile/parallel_for.h"

namespace kvplan {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The dKL re-runs of several cells share one forward while their logits fit in this many bytes:
// larger batches amortize dequantizing and packing each weight tile; the bound keeps a large
// vocabulary's logits (Gemma 3: 262 k) to one or two cells at a time.
constexpr size_t kDklBatchLogitBytes = size_t{512} << 20;

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
  // [pending cell][KV head] the part of o_mse's sum from the query heads the KV head serves.
  std::vector<std::vector<double>> o_mse_head_sums;
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
  out.o_mse_head_sums.assign(cells.size(), std::vector<double>(static_cast<size_t>(n_kv), 0.0));
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
        out.o_mse_head_sums[i][static_cast<size_t>(h / group)] += e.squared.sum;
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
      out.o_mse_head_sums[i][g] += e.squared.sum;
    }
  }
  return out;
}

}  // namespace

CellRunner::CellRunner(const Transformer& model, const CellRunOptions& options,
                       ReferenceCaptures& reference, std::vector<size_t> kl_prompts,
                       ProgressTracker& tracker)
    : model_(model),
      options_(options),
      reference_(reference),
      kl_prompts_(std::move(kl_prompts)),
      tracker_(tracker) {
  size_t kl_rows = 0;
  for (const size_t i : kl_prompts_) kl_rows += reference_.prompts[i].reference.rows.size();
  const size_t logit_bytes_per_cell =
      kl_rows * static_cast<size_t>(model_.config().vocab_size) * sizeof(float);
  cells_per_batch_ =
      std::max<size_t>(1, kDklBatchLogitBytes / std::max<size_t>(1, logit_bytes_per_cell));
}

void CellRunner::run_layer(int layer, const std::vector<size_t>& candidates, Profile& profile) {
  const ModelConfig& c = model_.config();
  std::vector<PromptCapture>& captures = reference_.prompts;
  const size_t n_prompts = captures.size();
  const auto layer_start = Clock::now();
  std::vector<Format> key_list, value_list;
  for (const size_t p : candidates) {
    key_list.push_back(profile.candidates[p].key);
    value_list.push_back(profile.candidates[p].value);
  }
  std::vector<size_t> key_of, value_of;
  const std::vector<Format> keys = distinct(key_list, key_of);
  const std::vector<Format> values = distinct(value_list, value_of);
  std::vector<std::pair<size_t, size_t>> cell_formats;
  for (size_t i = 0; i < candidates.size(); ++i) cell_formats.emplace_back(key_of[i], value_of[i]);

  std::vector<LayerPartials> partials(n_prompts);
  parallel_for(n_prompts, options_.threads, [&](size_t i) {
    partials[i] =
        attention_partials(captures[i], layer, c, options_.settings, keys, values, cell_formats,
                           profile.kv_absmax[static_cast<size_t>(layer)], options_.gpu);
  });
  metrics_s_ += seconds_since(layer_start);

  const auto dkl_start = Clock::now();
  std::vector<size_t> measured;  // cells (indices into `candidates`) whose dKL re-runs the model
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (profile.measures_dkl(candidates[i])) measured.push_back(i);
  }
  tracker_.report("layers", layer, candidates.size() - measured.size(), 0);
  const DklSums kl = measure_dkl(layer, candidates, measured, profile);
  dkl_s_ += seconds_since(dkl_start);

  const size_t K = kl_prompts_.size();
  for (size_t i = 0; i < candidates.size(); ++i) {
    MetricSum ek, ev, ea, eo, omse, dkl;
    const int n_kv = c.n_kv_heads[static_cast<size_t>(layer)];
    std::vector<double> head_sums(static_cast<size_t>(n_kv), 0.0);
    for (size_t pr = 0; pr < n_prompts; ++pr) {
      ek.add(partials[pr].e_k[key_of[i]]);
      ev.add(partials[pr].e_v[value_of[i]]);
      ea.add(partials[pr].e_a[key_of[i]]);
      eo.add(partials[pr].e_o[i]);
      omse.add(partials[pr].o_mse[i]);
      for (size_t g = 0; g < head_sums.size(); ++g) {
        head_sums[g] += partials[pr].o_mse_head_sums[i][g];
      }
    }
    for (size_t k = 0; k < K; ++k) dkl.add(kl.kl[i * K + k]);
    ProfileCell cell =
        describe_cell(c, layer, profile.candidates[candidates[i]], options_.settings);
    cell.metrics = {ek.mean(), ev.mean(),  ea.mean(),
                    eo.mean(), dkl.mean(), omse.mean(),
                    {},        {},         profile.measures_dkl(candidates[i])};
    if (n_kv > 1 && omse.count > 0) {
      for (const double sum : head_sums) {
        cell.metrics.o_mse_heads.push_back(sum / static_cast<double>(omse.count));
      }
    }
    if (n_kv > 1 && options_.per_head_dkl && profile.measures_dkl(candidates[i])) {
      for (size_t h = 0; h < static_cast<size_t>(n_kv); ++h) {
        MetricSum head;
        for (size_t k = 0; k < K; ++k) {
          head.add(kl.kl_heads[(i * static_cast<size_t>(n_kv) + h) * K + k]);
        }
        cell.metrics.dkl_heads.push_back(head.mean());
      }
    }
    profile.cells[static_cast<size_t>(layer)][candidates[i]] = cell;
    ++cells_done_;
  }
  for (PromptCapture& cap : captures) cap.drop_layer(layer);
}

CellRunner::DklSums CellRunner::measure_dkl(int layer, const std::vector<size_t>& candidates,
                                            const std::vector<size_t>& measured,
                                            const Profile& profile) {
  const ModelConfig& c = model_.config();
  const std::vector<PromptCapture>& captures = reference_.prompts;
  const size_t K = kl_prompts_.size();
  const int n_kv = c.n_kv_heads[static_cast<size_t>(layer)];
  const size_t H = n_kv > 1 && options_.per_head_dkl ? static_cast<size_t>(n_kv) : 0;
  DklSums out{std::vector<MetricSum>(candidates.size() * K),
              std::vector<MetricSum>(candidates.size() * H * K)};
  // What one re-run quantizes: a measured cell's pair on the whole layer (head -1), or on one KV
  // head of it, the other heads exact.
  struct Run {
    size_t cell;
    int head;
  };
  std::vector<Run> runs;
  for (const size_t ci : measured) {
    runs.push_back({ci, -1});
    for (size_t h = 0; h < H; ++h) runs.push_back({ci, static_cast<int>(h)});
  }
  const KvPair exact = KvPair::uniform(Format(FormatId::kF32));
  // Runs go through the model together, each dKL prompt of each run one sequence of the batch
  // (batched products, threaded inside; every sequence's logits are the bits it gets alone),
  // cells_per_batch_ at a time.
  for (size_t b0 = 0; b0 < runs.size(); b0 += cells_per_batch_) {
    const std::span<const Run> group(runs.data() + b0,
                                     std::min(cells_per_batch_, runs.size() - b0));
    std::vector<KvCache> caches;
    caches.reserve(group.size() * K);
    std::vector<Transformer::BatchSequence> batch;
    for (const Run& run : group) {
      const KvPair& pair = profile.candidates[candidates[run.cell]];
      std::vector<KvPair> pairs(static_cast<size_t>(c.n_layers), exact);
      pairs[static_cast<size_t>(layer)] = pair;
      KvCacheOptions kv = KvCacheOptions::per_layer(std::move(pairs), options_.settings);
      kv.chunk_attends_quantized = options_.chunk_attends_quantized;
      kv.fp8_scales.resize(static_cast<size_t>(c.n_layers));
      if (run.head < 0) {
        kv.fp8_scales[static_cast<size_t>(layer)] = profile.fp8_scales(layer, pair);
      } else {
        std::vector<KvPair> heads(H, exact);
        heads[static_cast<size_t>(run.head)] = pair;
        kv.head_pairs.assign(static_cast<size_t>(c.n_layers), {});
        kv.head_pairs[static_cast<size_t>(layer)] = heads;
        if (!profile.kv_absmax.empty()) {
          kv.fp8_scales[static_cast<size_t>(layer)] =
              fp8_scales_for_heads(heads, profile.kv_absmax.at(static_cast<size_t>(layer)));
        }
      }
      for (size_t k = 0; k < K; ++k) {
        const PromptCapture& cap = captures[kl_prompts_[k]];
        caches.emplace_back(c, kv);
        batch.push_back(
            {&cap.layer_input[static_cast<size_t>(layer)], &caches.back(), cap.kl_from});
      }
    }
    // Sequence j's logits start at row first_row[j].
    std::vector<Eigen::Index> first_row(batch.size() + 1, 0);
    for (size_t j = 0; j < batch.size(); ++j) {
      first_row[j + 1] = first_row[j] + batch[j].layer_input->rows() -
                         static_cast<Eigen::Index>(batch[j].logits_from_row);
    }
    const RowMatrix logits = model_.forward_batch_from_layer(layer, batch);
    parallel_for(batch.size(), options_.threads, [&](size_t j) {
      const RowMatrix own = logits.middleRows(first_row[j], first_row[j + 1] - first_row[j]);
      const Run& run = group[j / K];
      const MetricSum sum = kl_sum(captures[kl_prompts_[j % K]].reference, own);
      if (run.head < 0) {
        out.kl[run.cell * K + j % K] = sum;
      } else {
        out.kl_heads[(run.cell * H + static_cast<size_t>(run.head)) * K + j % K] = sum;
      }
    });
    for (size_t g = 0; g < group.size(); ++g) {
      tracker_.report("layers", layer, group[g].head < 0 ? 1 : 0,
                      static_cast<double>(K) * (c.n_layers - layer + 1));
    }
  }
  return out;
}

}  // namespace kvplan
