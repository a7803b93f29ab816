#include "reports/src/report_data.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_text.h"
#include "plan/memory_estimate.h"
#include "reports/src/number_format.h"
#include "search/surrogate.h"
#include "search/tune.h"

namespace kvplan::report {
namespace {

using nlohmann::json;

// The plan's measured sections are free-form JSON written by search/tune.cpp; these read them
// with the file and the field path in every error.
class JsonReader {
 public:
  explicit JsonReader(std::string file) : file_(std::move(file)) {}

  [[nodiscard]] std::optional<double> number(const json& object, const char* key,
                                             const std::string& where) const {
    if (!object.is_object() || !object.contains(key)) return std::nullopt;
    const json& v = object.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      fail(ErrorCode::kInvalidArgument, "{}: field '{}.{}': expected a finite number, got {}",
           file_, where, key, json_excerpt(v));
    }
    return v.get<double>();
  }
  [[nodiscard]] double required_number(const json& object, const char* key,
                                       const std::string& where) const {
    const std::optional<double> v = number(object, key, where);
    if (!v) fail(ErrorCode::kInvalidArgument, "{}: field '{}.{}' is missing", file_, where, key);
    return *v;
  }
  [[nodiscard]] std::string string(const json& object, const char* key,
                                   const std::string& where) const {
    if (!object.is_object() || !object.contains(key)) return {};
    const json& v = object.at(key);
    if (!v.is_string()) {
      fail(ErrorCode::kInvalidArgument, "{}: field '{}.{}': expected a string, got {}", file_,
           where, key, json_excerpt(v));
    }
    return v.get<std::string>();
  }
  [[nodiscard]] bool boolean(const json& object, const char* key, const std::string& where) const {
    if (!object.is_object() || !object.contains(key)) return false;
    const json& v = object.at(key);
    if (!v.is_boolean()) {
      fail(ErrorCode::kInvalidArgument, "{}: field '{}.{}': expected true or false, got {}", file_,
           where, key, json_excerpt(v));
    }
    return v.get<bool>();
  }
  [[nodiscard]] const json& array(const json& parent, const char* key,
                                  const std::string& where) const {
    static const json kEmpty = json::array();
    if (!parent.is_object() || !parent.contains(key)) return kEmpty;
    const json& v = parent.at(key);
    if (!v.is_array()) {
      fail(ErrorCode::kInvalidArgument, "{}: field '{}{}': expected an array", file_, where, key);
    }
    return v;
  }
  [[nodiscard]] const std::string& file() const { return file_; }

 private:
  std::string file_;
};

void check_same_model(const NamedProfile& profile, const NamedPlan& plan) {
  const ProfileModel& a = profile.profile.model;
  const PlanModel& b = plan.plan.model;
  if (a.fingerprint != b.fingerprint) {
    fail(ErrorCode::kInvalidArgument,
         "{}: model.fingerprint {} ('{}') differs from {}'s {} ('{}'): the plan is for another "
         "model than the profile",
         plan.file_name, b.fingerprint, b.name, profile.file_name, a.fingerprint, a.name);
  }
  if (a.num_layers != b.geometry.n_layers()) {
    fail(ErrorCode::kInvalidArgument, "{}: {} layers, but {} has {}", plan.file_name,
         b.geometry.n_layers(), profile.file_name, a.num_layers);
  }
}

Heatmap heatmap(const Profile& p, bool dkl) {
  Heatmap h;
  h.metric = dkl ? "dKL" : "e_o";
  h.description = dkl ? "KL(exact || quantized) of the next-token distribution, this layer alone "
                        "quantized (nats)"
                      : "relative error of the attention output, this layer quantized";
  for (const KvPair& c : p.candidates) h.candidates.push_back(c.name());
  for (int l = 0; l < p.model.num_layers; ++l) {
    std::vector<double> row;
    for (size_t c = 0; c < p.candidates.size(); ++c) {
      const CellMetrics& m = p.cell(l, c)->metrics;
      row.push_back(dkl ? m.dkl : m.e_o);
    }
    h.values.push_back(std::move(row));
  }
  return h;
}

// A pair's sensitivity in one layer of the search's view (a side profile's pairs are sums).
std::optional<double> pair_error(const std::vector<search::LayerCandidates>& view, size_t layer,
                                 const KvPair& pair) {
  if (layer >= view.size()) return std::nullopt;
  for (const search::LayerCandidate& c : view[layer].candidates) {
    if (c.pair == pair) return c.error;
  }
  return std::nullopt;
}

std::vector<double> surrogate_weights(const JsonReader& r, const json& provenance, size_t n) {
  const json& w = r.array(provenance, "surrogate_weights", "provenance.");
  if (w.empty()) return {};
  if (w.size() != n) {
    fail(ErrorCode::kInvalidArgument,
         "{}: field 'provenance.surrogate_weights': {} weights, expected one per layer ({})",
         r.file(), w.size(), n);
  }
  std::vector<double> weights;
  for (size_t i = 0; i < n; ++i) {
    if (!w[i].is_number()) {
      fail(ErrorCode::kInvalidArgument,
           "{}: field 'provenance.surrogate_weights[{}]': expected a number", r.file(), i);
    }
    weights.push_back(w[i].get<double>());
  }
  return weights;
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
  for (int l = 0; l < g.n_layers(); ++l) {
    row.equivalent_bits += pairs[static_cast<size_t>(l)].nominal_bits(g.layers[l].head_dim);
  }
  row.equivalent_bits /= g.n_layers();
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
  // The search's own view of the profile; it refuses an incomplete (shard) profile.
  const JsonReader r(named_plan.file_name);
  const std::string metric = r.string(plan.provenance, "sensitivity", "provenance");
  std::vector<search::LayerCandidates> search_view, dkl_view, e_o_view;
  try {
    dkl_view = search::candidates_from_profile(profile, search::SensitivityMetric::kDkl);
    e_o_view = search::candidates_from_profile(profile, search::SensitivityMetric::kEo);
  } catch (const Error& e) {
    fail(e.code(), "{}: {}", named_profile.file_name, e.what());
  }
  search_view = metric == "e_o" ? e_o_view : dkl_view;

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
  const std::vector<double> weights = surrogate_weights(r, plan.provenance, n);
  const KvGeometry& g = plan.model.geometry;
  for (size_t l = 0; l < n; ++l) {
    const PlanLayer& pl = plan.layers[l];
    LayerRow row;
    row.index = pl.index;
    row.group = pl.group;
    row.pair = pl.pair;
    const LayerTokenBytes bytes =
        layer_bytes_per_token(g.layers[l], pl.pair, plan.quantization, static_cast<int>(l));
    row.key_bytes_per_token = bytes.key;
    row.value_bytes_per_token = bytes.value;
    if (const auto e = pair_error(dkl_view, l, pl.pair)) row.dkl = *e;
    if (const auto e = pair_error(e_o_view, l, pl.pair)) row.e_o = *e;
    if (!weights.empty()) row.surrogate_weight = weights[l];
    d.layers.push_back(row);
  }

  d.memory_measure = r.string(plan.provenance, "memory_measure", "provenance");
  if (d.memory_measure.empty()) d.memory_measure = "equivalent_bits";
  const bool by_bits = d.memory_measure != "bytes_per_token";
  d.budget = r.string(plan.provenance, "budget", "provenance");

  for (size_t i = 0; i < plan.pareto_front.size(); ++i) {
    const json& p = plan.pareto_front[i];
    const std::string where = fmt::format("pareto_front[{}]", i);
    FrontPoint f;
    f.memory = r.required_number(p, "memory", where);
    f.predicted_error = r.required_number(p, "predicted_error", where);
    f.equivalent_bits = r.number(p, "equivalent_bits", where).value_or(by_bits ? f.memory : 0);
    f.bytes_per_token = r.number(p, "bytes_per_token", where).value_or(by_bits ? 0 : f.memory);
    f.mean_kl = r.number(p, "mean_kl", where);
    f.source = r.string(p, "source", where);
    d.front.push_back(f);
  }

  for (size_t i = 0; i < plan.baselines.size(); ++i) {
    const json& b = plan.baselines[i];
    const std::string where = fmt::format("baselines[{}]", i);
    BaselinePoint p;
    p.kv = r.string(b, "kv", where);
    if (p.kv.empty())
      fail(ErrorCode::kInvalidArgument, "{}: field '{}.kv' is missing", r.file(), where);
    const KvPair pair = KvPair::parse(p.kv);
    p.equivalent_bits = r.required_number(b, "equivalent_bits", where);
    p.bytes_per_token = r.required_number(b, "bytes_per_token", where);
    p.memory = by_bits ? p.equivalent_bits : p.bytes_per_token;
    p.within_budget = r.boolean(b, "within_budget", where);
    p.mean_kl = r.required_number(b, "mean_kl", where);
    p.top1_agreement = r.number(b, "top1_agreement", where).value_or(0);
    p.ppl = r.number(b, "ppl", where).value_or(0);
    if (b.contains("kl_difference") && b["kl_difference"].is_object()) {
      const json& k = b["kl_difference"];
      const std::string kw = where + ".kl_difference";
      p.kl_difference = r.required_number(k, "plan_minus_baseline", kw);
      p.kl_difference_low = r.required_number(k, "low", kw);
      p.kl_difference_high = r.required_number(k, "high", kw);
      p.verdict = r.string(k, "verdict", kw);
    }
    // The surrogate the search ranked its front with, on the uniform assignment.
    if (const auto recorded = r.number(b, "predicted_error", where)) {
      p.predicted_error = *recorded;
    } else if (!weights.empty()) {
      std::vector<double> errors;
      for (size_t l = 0; l < search_view.size(); ++l) {
        if (const auto e = pair_error(search_view, l, pair)) errors.push_back(*e);
      }
      if (errors.size() == search_view.size()) {
        const double gamma =
            r.number(plan.provenance, "surrogate_interaction", "provenance").value_or(0.0);
        p.predicted_error = search::predict({weights, gamma}, errors);
      }
    }
    d.baselines.push_back(p);
  }

  const json& validations = r.array(plan.provenance, "validations", "provenance.");
  for (size_t i = 0; i < validations.size(); ++i) {
    const std::string where = fmt::format("provenance.validations[{}]", i);
    const json& v = validations[i];
    d.validations.push_back({static_cast<int>(r.required_number(v, "round", where)),
                             r.required_number(v, "memory", where),
                             r.required_number(v, "predicted_error", where),
                             r.required_number(v, "mean_kl", where)});
  }

  const json& q = plan.quality;
  d.plan_mean_kl = r.number(q, "mean_kl", "quality");
  d.plan_top1 = r.number(q, "top1_agreement", "quality");
  d.plan_ppl = r.number(q, "ppl", "quality");
  d.plan_ppl_exact = r.number(q, "ppl_exact_kv", "quality");
  d.plan_predicted = r.number(q, "predicted_error", "quality");
  d.validated = r.boolean(q, "validated", "quality");
  auto& vf = d.validation_facts;
  add_fact(vf, "validated on the real model", d.validated ? "yes" : "no");
  add_fact(vf, "metric", r.string(q, "metric", "quality"));
  if (d.plan_mean_kl) add_fact(vf, "mean KL", format_significant(*d.plan_mean_kl));
  if (d.plan_top1) add_fact(vf, "top-1 agreement", format_percent(*d.plan_top1));
  if (d.plan_ppl) add_fact(vf, "perplexity", format_significant(*d.plan_ppl, 6));
  if (d.plan_ppl_exact) {
    add_fact(vf, "perplexity, exact KV", format_significant(*d.plan_ppl_exact, 6));
  }
  if (d.plan_predicted) add_fact(vf, "surrogate prediction", format_significant(*d.plan_predicted));
  if (q.contains("data")) {
    const json& data = q.at("data");
    add_fact(vf, "measured on (report text)", r.string(data, "source", "quality.data"));
    add_fact(vf, "report text hash", r.string(data, "hash", "quality.data"));
    if (const auto t = r.number(data, "tokens", "quality.data")) {
      add_fact(vf, "report text tokens", format_count(static_cast<int64_t>(*t)));
    }
    if (const auto s = r.number(data, "scored", "quality.data")) {
      add_fact(vf, "scored positions", format_count(static_cast<int64_t>(*s)));
    }
  }
  if (q.contains("selection")) {
    const json& sel = q.at("selection");
    add_fact(vf, "chosen on (selection text)", r.string(sel, "source", "quality.selection"));
    add_fact(vf, "chosen as", r.string(q, "chosen_as", "quality"));
    if (const auto k = r.number(q, "selection_mean_kl", "quality")) {
      add_fact(vf, "mean KL on the selection text", format_significant(*k));
    }
    if (const auto c = r.number(q, "rank_correlation_predicted_measured", "quality")) {
      add_fact(vf, "rank correlation, predicted vs measured", format_significant(*c, 3));
    }
  }
  if (q.contains("best_uniform")) {
    const json& b = q.at("best_uniform");
    add_fact(
        vf, "best uniform configuration within the budget",
        fmt::format("{}: mean KL {}; plan / best = {}", r.string(b, "kv", "quality.best_uniform"),
                    format_significant(r.required_number(b, "mean_kl", "quality.best_uniform")),
                    format_significant(r.required_number(b, "ratio", "quality.best_uniform"), 3)));
  }

  // Memory: the plan, bf16 and every uniform baseline the model can pack, by memory_estimate.
  d.memory = memory;
  d.available_bytes = memory.gpu_memory_bytes - memory.weights_bytes;
  QuantSettings bf16_settings = plan.quantization;
  bf16_settings.mode = QuantMode::kPerToken;
  const std::vector<KvPair> bf16(n, KvPair::parse("KV16"));
  const double bf16_bytes = kv_bytes_per_token(g, bf16, bf16_settings);
  MemoryRow plan_row =
      memory_row("plan", g, plan.pairs(), plan.quantization, bf16_bytes, memory, d.available_bytes);
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
  const std::string computed_hash = search::profile_hash(profile);
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
  if (plan.provenance.is_object()) {
    for (const auto& [key, value] : plan.provenance.items()) {
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
  if (plan.provenance.is_object() && plan.provenance.contains("profile")) {
    const std::string recorded =
        r.string(plan.provenance.at("profile"), "hash", "provenance.profile");
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

}  // namespace kvplan::report
