#include "report/report_data.h"

#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_fields.h"
#include "formats/kv_bytes.h"
#include "plan/layer_ranges.h"
#include "profile/pair_view.h"
#include "profile/profile_hash.h"
#include "report/number_format.h"

namespace kvplan::report {
namespace {

using nlohmann::json;

void check_same_model(const NamedProfile& profile, const NamedPlan& plan) {
  const KvModel& a = profile.profile.model;
  const KvModel& b = plan.plan.model;
  if (a.fingerprint != b.fingerprint) {
    fail(ErrorCode::kInvalidArgument,
         "{}: model.fingerprint {} ('{}') differs from {}'s {} ('{}'): the plan is for another "
         "model than the profile",
         plan.file_name, b.fingerprint, b.name, profile.file_name, a.fingerprint, a.name);
  }
  if (a.geometry.n_layers() != b.geometry.n_layers()) {
    fail(ErrorCode::kInvalidArgument, "{}: {} layers, but {} has {}", plan.file_name,
         b.geometry.n_layers(), profile.file_name, a.geometry.n_layers());
  }
}

Heatmap heatmap(const Profile& p, bool dkl) {
  Heatmap h;
  h.metric = dkl ? "dKL" : "e_o";
  h.description = dkl ? "KL(exact || quantized) of the next-token distribution, this layer alone "
                        "quantized (nats)"
                      : "relative error of the attention output, this layer quantized";
  for (const KvPair& c : p.candidates) h.candidates.push_back(c.name());
  for (int l = 0; l < p.n_layers(); ++l) {
    std::vector<double> row;
    for (size_t c = 0; c < p.candidates.size(); ++c) {
      const CellMetrics& m = p.cell(l, c)->metrics;
      row.push_back(dkl ? m.dkl : m.e_o);
    }
    h.values.push_back(std::move(row));
  }
  return h;
}

}  // namespace

std::string LayerRow::side_text(bool keys) const {
  if (heads.empty()) return (keys ? pair.key : pair.value).name();
  std::string out;
  for (const KvPair& p : heads) out += (out.empty() ? "" : " ") + (keys ? p.key : p.value).name();
  return out;
}

namespace {

// A pair's sensitivity in one entry of the search's view (a side profile's pairs are sums).
std::optional<double> pair_error(const std::vector<LayerCandidates>& view, size_t layer,
                                 const KvPair& pair) {
  if (layer >= view.size()) return std::nullopt;
  for (const LayerCandidate& c : view[layer].candidates) {
    if (c.pair == pair) return c.error;
  }
  return std::nullopt;
}

bool fits(const KvGeometry& g, const std::vector<KvPair>& pairs, const QuantSettings& s) {
  try {
    (void)kv_bytes_per_token(g, pairs, s);
    return true;
  } catch (const Error&) {
    return false;
  }
}

MemoryRow memory_row(const std::string& label, const KvGeometry& g,
                     const std::vector<KvPair>& pairs, const QuantSettings& s,
                     double bf16_bytes_per_token, const MemoryOptions& o, uint64_t available) {
  MemoryRow row;
  row.label = label;
  row.bytes_per_token = kv_bytes_per_token(g, pairs, s);
  row.equivalent_bits = kv_equivalent_bits(g, pairs);
  row.compression_vs_bf16 = bf16_bytes_per_token / row.bytes_per_token;
  for (int64_t t : o.contexts) {
    const uint64_t bytes = kv_cache_bytes(g, pairs, s, t, 1);
    row.bytes_per_sequence.push_back(bytes);
    row.sequences_that_fit.push_back(bytes ? static_cast<int64_t>(available / bytes) : 0);
  }
  row.longest_context = max_tokens_that_fit(g, pairs, s, available, 1);
  return row;
}

void add_fact(std::vector<std::pair<std::string, std::string>>& facts, std::string label,
              std::string value) {
  if (!value.empty()) facts.emplace_back(std::move(label), std::move(value));
}

// Strings as they are; numbers in nlohmann's shortest round-trip form ("0.05", not "0.0500000").
std::string scalar_text(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

std::string kl_difference_text(const BaselinePoint& b) {
  if (!b.kl_difference) return "";
  return fmt::format("{:+.4g} [{:+.4g}, {:+.4g}] {}", *b.kl_difference, *b.kl_difference_low,
                     *b.kl_difference_high, b.verdict);
}

std::vector<size_t> front_rows_shown(const std::vector<FrontPoint>& front, size_t limit) {
  const size_t n = front.size();
  std::vector<bool> shown(n, n <= limit);
  if (n > limit && limit >= 2) {
    for (size_t k = 0; k < limit; ++k) shown[(k * (n - 1) + (limit - 1) / 2) / (limit - 1)] = true;
  }
  std::vector<size_t> rows;
  for (size_t i = 0; i < n; ++i) {
    if (shown[i] || front[i].mean_kl) rows.push_back(i);
  }
  return rows;
}

ReportData build_report_data(const NamedProfile& named_profile, const NamedPlan& named_plan,
                             const MemoryOptions& memory) {
  const Profile& profile = named_profile.profile;
  const Plan& plan = named_plan.plan;
  check_same_model(named_profile, named_plan);
  if (memory.contexts.empty()) fail(ErrorCode::kInvalidArgument, "--context: no context given");
  for (int64_t t : memory.contexts) {
    if (t <= 0) fail(ErrorCode::kInvalidArgument, "--context {}: expected a positive count", t);
  }
  if (memory.weights_bytes >= memory.gpu_memory_bytes) {
    fail(ErrorCode::kInvalidArgument, "--weights-bytes {} leaves nothing of --gpu-memory {}",
         memory.weights_bytes, memory.gpu_memory_bytes);
  }
  const std::string& file = named_plan.file_name;
  const PlanQuality& q = plan.results.quality;
  const SearchProvenance& provenance = plan.results.provenance;
  // The profile's pair view; it refuses an incomplete (shard) profile.
  std::vector<LayerCandidates> dkl_view, e_o_view;
  try {
    dkl_view = candidates_from_profile(profile, SensitivityMetric::kDkl);
    e_o_view = candidates_from_profile(profile, SensitivityMetric::kEo);
  } catch (const Error& e) {
    fail(e.code(), "{}: {}", named_profile.file_name, e.what());
  }
  // The sensitivity the search ranked with.
  const std::vector<LayerCandidates>& search_view =
      provenance.sensitivity == "e_o" ? e_o_view : dkl_view;

  ReportData d;
  d.profile_file = named_profile.file_name;
  d.plan_file = named_plan.file_name;
  d.model = plan.model;
  d.quantization = plan.quantization;
  d.scale_dtype = plan.scale_dtype;
  d.summary = summarize_plan(plan);
  d.dkl = heatmap(profile, true);
  d.e_o = heatmap(profile, false);

  const size_t n = plan.layers.size();
  const std::vector<double>& weights = provenance.surrogate_weights;
  const KvGeometry& g = plan.model.geometry;
  // A per-KV-head plan: its entries are (layer, head), its surrogate weights one per entry, and a
  // per-head layer's dKL the sum of its heads' (profile/pair_view.h).
  std::vector<LayerCandidates> head_view;
  if (plan.per_head()) {
    try {
      head_view = candidates_from_profile(profile, SensitivityMetric::kDkl, KvGranularity::kHead);
    } catch (const Error& e) {
      d.warnings.push_back(fmt::format("per-KV-head dKL not shown: {}", e.what()));
    }
  }
  size_t first_entry = 0;  // the layer's first entry in a per-head plan
  for (size_t l = 0; l < n; ++l) {
    const PlanLayer& pl = plan.layers[l];
    const size_t heads = static_cast<size_t>(g.layers[l].n_kv_heads);
    LayerRow row;
    row.index = pl.index;
    row.group = pl.group;
    row.pair = pl.pair;
    row.heads = pl.heads;
    const LayerTokenBytes bytes = plan_layer_bytes(plan, l);
    row.key_bytes_per_token = bytes.key;
    row.value_bytes_per_token = bytes.value;
    if (!pl.per_head()) {
      if (const auto e = pair_error(dkl_view, l, pl.pair)) row.dkl = *e;
      if (const auto e = pair_error(e_o_view, l, pl.pair)) row.e_o = *e;
    } else if (head_view.size() == static_cast<size_t>(g.n_kv_heads_total())) {
      double sum = 0;
      bool all = true;
      for (size_t h = 0; h < heads; ++h) {
        const auto e = pair_error(head_view, first_entry + h, pl.heads[h]);
        all = all && e.has_value();
        sum += e.value_or(0);
      }
      if (all) row.dkl = sum;
    }
    if (weights.size() == n) {
      row.surrogate_weight = weights[l];
    } else if (weights.size() == static_cast<size_t>(g.n_kv_heads_total())) {
      double sum = 0;
      for (size_t h = 0; h < heads; ++h) sum += weights[first_entry + h];
      row.surrogate_weight = sum / static_cast<double>(heads);
    }
    first_entry += heads;
    d.layers.push_back(row);
  }

  d.memory_measure = provenance.memory_measure;
  if (d.memory_measure.empty()) d.memory_measure = "equivalent_bits";
  const bool by_bits = d.memory_measure != "bytes_per_token";
  d.budget = provenance.budget;

  for (const ParetoPoint& p : plan.results.pareto_front) {
    FrontPoint f;
    f.memory = p.memory;
    f.predicted_error = p.predicted_error;
    f.equivalent_bits = p.equivalent_bits.value_or(by_bits ? f.memory : 0);
    f.bytes_per_token = p.bytes_per_token.value_or(by_bits ? 0 : f.memory);
    f.mean_kl = p.mean_kl;
    f.source = p.source;
    d.front.push_back(f);
  }

  for (size_t i = 0; i < plan.results.baselines.size(); ++i) {
    const UniformBaseline& b = plan.results.baselines[i];
    BaselinePoint p;
    p.kv = b.kv;
    p.equivalent_bits = b.equivalent_bits;
    p.bytes_per_token = b.bytes_per_token;
    p.memory = by_bits ? p.equivalent_bits : p.bytes_per_token;
    p.within_budget = b.within_budget;
    for (const std::string& why : b.measured_because) {
      p.measured_because += (p.measured_because.empty() ? "" : "; ") + why;
    }
    if (!b.mean_kl) {
      fail(ErrorCode::kInvalidArgument,
           "{}: field 'baselines[{}].mean_kl' is missing: a listed baseline is a measured one",
           file, i);
    }
    p.mean_kl = *b.mean_kl;
    p.top1_agreement = b.top1_agreement.value_or(0);
    p.ppl = b.ppl.value_or(0);
    if (b.kl_difference) {
      p.kl_difference = b.kl_difference->plan_minus_baseline;
      p.kl_difference_low = b.kl_difference->low;
      p.kl_difference_high = b.kl_difference->high;
      p.verdict = b.kl_difference->verdict;
    }
    // The surrogate the search ranked its front with, on the uniform assignment: recorded with
    // each baseline, else predicted with the surrogate the plan recorded.
    if (b.predicted_error) {
      p.predicted_error = *b.predicted_error;
    } else if (!weights.empty()) {
      const KvPair pair = KvPair::parse(p.kv);
      std::vector<double> errors;
      for (size_t l = 0; l < search_view.size(); ++l) {
        if (const auto e = pair_error(search_view, l, pair)) errors.push_back(*e);
      }
      if (errors.size() == search_view.size()) {
        p.predicted_error =
            surrogate_prediction(weights, provenance.surrogate_interaction.value_or(0.0), errors);
      }
    }
    d.baselines.push_back(p);
  }

  for (const ValidatedPlan& v : provenance.validations) {
    d.validations.push_back({v.round, v.memory, v.predicted_error, v.mean_kl});
  }

  d.plan_mean_kl = q.mean_kl;
  d.plan_top1 = q.top1_agreement;
  d.plan_ppl = q.ppl;
  d.plan_ppl_exact = q.ppl_exact_kv;
  d.plan_predicted = q.predicted_error;
  d.validated = q.validated;
  auto& vf = d.validation_facts;
  add_fact(vf, "validated on the real model", d.validated ? "yes" : "no");
  add_fact(vf, "metric", q.metric);
  if (d.plan_mean_kl) add_fact(vf, "mean KL", format_significant(*d.plan_mean_kl));
  if (d.plan_top1) add_fact(vf, "top-1 agreement", format_percent(*d.plan_top1));
  if (d.plan_ppl) add_fact(vf, "perplexity", format_significant(*d.plan_ppl, 6));
  if (d.plan_ppl_exact) {
    add_fact(vf, "perplexity, exact KV", format_significant(*d.plan_ppl_exact, 6));
  }
  if (d.plan_predicted) add_fact(vf, "surrogate prediction", format_significant(*d.plan_predicted));
  if (q.data) {
    add_fact(vf, "measured on (report text)", q.data->source);
    add_fact(vf, "report text hash", q.data->hash);
    add_fact(vf, "report text tokens", format_count(q.data->tokens));
    add_fact(vf, "scored positions", format_count(q.data->scored));
  }
  if (q.selection) {
    add_fact(vf, "chosen on (selection text)", q.selection->source);
    add_fact(vf, "chosen as", q.chosen_as);
    if (q.selection_mean_kl) {
      add_fact(vf, "mean KL on the selection text", format_significant(*q.selection_mean_kl));
    }
    if (q.rank_correlation) {
      add_fact(vf, "rank correlation, predicted vs measured",
               format_significant(*q.rank_correlation, 3));
    }
  }
  if (q.rank_correlation_on_report) {
    add_fact(vf, "rank correlation on the report text (plan and measured baselines)",
             format_significant(*q.rank_correlation_on_report, 3));
  }
  if (!plan.results.provenance.rounds.empty()) {
    add_fact(vf, "validation loop", plan.results.provenance.rounds.back().next);
  }
  if (q.long_context) {
    d.long_context_baseline = q.long_context->baseline;
    d.long_context = q.long_context->rows;
  }
  if (q.best_uniform) {
    add_fact(vf, "best uniform configuration within the budget",
             fmt::format("{}: mean KL {}; plan / best = {}", q.best_uniform->kv,
                         format_significant(q.best_uniform->mean_kl),
                         format_significant(q.best_uniform->ratio, 3)));
  }
  if (q.headroom) {
    add_fact(vf, "headroom (additive surrogate): best plan / best uniform, predicted",
             fmt::format("{} / {} ({}) = {}", format_significant(q.headroom->best_plan_predicted),
                         format_significant(q.headroom->best_uniform_predicted),
                         q.headroom->best_uniform, format_significant(q.headroom->ratio, 3)));
  }
  for (const ComparedPlan& c : q.compared_plans) {
    add_fact(vf,
             fmt::format("against {} ({}, {} B/token)", c.source, c.granularity,
                         format_significant(c.bytes_per_token, 6)),
             fmt::format("mean KL {}; plan - it {} [{}, {}]: {}", format_significant(c.mean_kl),
                         format_significant(c.difference.plan_minus_baseline),
                         format_significant(c.difference.low),
                         format_significant(c.difference.high), c.difference.verdict));
  }

  // Memory: the plan, bf16 and every uniform baseline the model can pack, by memory_estimate.
  d.memory = memory;
  std::map<int64_t, std::vector<int>> sliding;  // window -> layers
  for (size_t l = 0; l < g.layers.size(); ++l) {
    if (g.layers[l].sliding_window > 0) {
      sliding[g.layers[l].sliding_window].push_back(static_cast<int>(l));
    }
  }
  for (const auto& [window, layers] : sliding) {
    d.sliding_window_note += fmt::format(
        "{}{} of {} layers ({}) attend over a {}-token sliding window and hold at "
        "most that many tokens of a sequence",
        d.sliding_window_note.empty() ? "" : "; ", layers.size(), g.layers.size(),
        layer_ranges(layers), window);
  }
  if (!d.sliding_window_note.empty()) {
    d.sliding_window_note +=
        ": the bytes per sequence count min(context, window) tokens there, while B/token is "
        "every layer's steady state per token held.";
  }
  d.available_bytes = memory.gpu_memory_bytes - memory.weights_bytes;
  QuantSettings bf16_settings = plan.quantization;
  bf16_settings.mode = QuantMode::kPerToken;
  const std::vector<KvPair> bf16(n, KvPair::parse("KV16"));
  const double bf16_bytes = kv_bytes_per_token(g, bf16, bf16_settings);
  MemoryRow plan_row = memory_row("plan", g, plan.kv_config(), plan.quantization, bf16_bytes,
                                  memory, d.available_bytes);
  plan_row.is_plan = true;
  d.memory_rows.push_back(plan_row);
  d.memory_rows.push_back(
      memory_row("KV16 (bf16)", g, bf16, bf16_settings, bf16_bytes, memory, d.available_bytes));
  for (const BaselinePoint& b : d.baselines) {
    const std::vector<KvPair> pairs(n, KvPair::parse(b.kv));
    if (!fits(g, pairs, plan.quantization)) continue;
    d.memory_rows.push_back(
        memory_row(b.kv, g, pairs, plan.quantization, bf16_bytes, memory, d.available_bytes));
  }

  // Provenance: where the numbers come from.
  auto& pv = d.provenance;
  add_fact(pv, "plan file", named_plan.file_name);
  add_fact(pv, "plan tool version", plan.tool_version);
  add_fact(pv, "plan created", plan.created);
  add_fact(pv, "profile file", named_profile.file_name);
  add_fact(pv, "profile tool version", profile.tool_version);
  add_fact(pv, "model fingerprint", plan.model.fingerprint);
  const std::string computed_hash = profile_hash(profile);
  add_fact(pv, "profile hash", computed_hash);
  const ProfileCalibration& cal = profile.calibration;
  add_fact(pv, "calibration prompts",
           fmt::format("{}: {} prompts, {} tokens (at most {} per prompt, {} truncated); dKL on {} "
                       "prompts, {} tokens",
                       cal.source, cal.prompts, format_count(cal.tokens), cal.max_tokens,
                       cal.truncated, cal.kl_prompts, format_count(cal.kl_tokens)));
  add_fact(pv, "calibration hash", cal.hash);
  add_fact(pv, "quantization",
           fmt::format("{}, group {}, residual {}, page {} tokens, scales {}",
                       quant_mode_name(plan.quantization.mode), plan.quantization.group_size,
                       plan.quantization.residual_length, plan.quantization.block_size,
                       plan.scale_dtype));
  // Search settings: every scalar the search recorded (lists are shown in their own sections).
  {
    const json settings = provenance_to_json(provenance);
    for (const auto& [key, value] : settings.items()) {
      if (value.is_null()) continue;  // e.g. no budget
      if (value.is_primitive()) add_fact(pv, "search " + key, scalar_text(value));
      if (value.is_object() && key != "profile") {
        std::string joined;
        for (const auto& [k, v] : value.items()) {
          if (!v.is_primitive()) continue;
          joined += (joined.empty() ? "" : ", ") + k + " " + scalar_text(v);
        }
        add_fact(pv, "search " + key, joined);
      }
    }
  }
  if (provenance.profile) {
    const std::string& recorded = provenance.profile->hash;
    add_fact(pv, "profile hash the plan was searched on", recorded);
    if (!recorded.empty() && recorded != computed_hash) {
      d.warnings.push_back(fmt::format(
          "{} was searched on a profile with hash {}, but {} hashes to {}: the sensitivity maps "
          "show a different profile of the same model",
          named_plan.file_name, recorded, named_profile.file_name, computed_hash));
    }
  }
  return d;
}

EnginePlanRow engine_plan_row(const NamedPlan& named, const Plan& report_plan) {
  const Plan& p = named.plan;
  const KvModel& model = report_plan.model;
  if (p.model.fingerprint != model.fingerprint) {
    fail(ErrorCode::kInvalidArgument, "{}: a plan of model {} ({}), the report's is {} ({})",
         named.file_name, p.model.name, p.model.fingerprint, model.name, model.fingerprint);
  }
  const std::optional<double> budget = p.results.provenance.budget_value,
                              report_budget = report_plan.results.provenance.budget_value;
  if (budget != report_budget) {
    fail(ErrorCode::kInvalidArgument,
         "{}: provenance.budget_value: searched at {}, the report's plan at {}; the engines' "
         "plans are compared at one budget",
         named.file_name, budget ? fmt::format("{}", *budget) : "no budget",
         report_budget ? fmt::format("{}", *report_budget) : "no budget");
  }
  const PlanQuality& q = p.results.quality;
  if (!q.mean_kl) {
    fail(ErrorCode::kInvalidArgument, "{}: quality.mean_kl: the plan was not measured",
         named.file_name);
  }
  const SearchProvenance& pv = p.results.provenance;
  EnginePlanRow r;
  r.engine = pv.engine.empty() ? "kvplan" : pv.engine;
  r.structure = pv.engine_structure.empty() ? "any pair on any layer" : pv.engine_structure;
  r.file = named.file_name;
  r.bytes_per_token = summarize_plan(p).bytes_per_token;
  r.mean_kl = q.mean_kl;
  r.top1 = q.top1_agreement;
  if (q.best_uniform) {
    r.best_uniform = q.best_uniform->kv;
    r.best_uniform_kl = q.best_uniform->mean_kl;
    r.diff = q.best_uniform->difference.plan_minus_baseline;
    r.diff_low = q.best_uniform->difference.low;
    r.diff_high = q.best_uniform->difference.high;
  }
  return r;
}

}  // namespace kvplan::report
