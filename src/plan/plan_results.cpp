#include "plan/plan_results.h"

#include <limits>

#include <fmt/format.h>

#include "core/json_fields.h"
#include "formats/kv_pair.h"

namespace kvplan {
namespace {

using json = nlohmann::json;

template <typename T>
void put(json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

void put(json& j, const char* key, const std::string& value) {
  if (!value.empty()) j[key] = value;
}

std::optional<uint64_t> optional_count(const JsonFields& f, const char* key) {
  const auto v = f.optional_integer(key, 0, std::numeric_limits<int64_t>::max());
  return v ? std::optional<uint64_t>(static_cast<uint64_t>(*v)) : std::nullopt;
}

// Quality

MeasuredText read_text(const JsonFields& f) {
  return {f.optional_string("source").value_or(""), f.optional_string("hash").value_or(""),
          f.optional_integer("tokens", 0, std::numeric_limits<int64_t>::max()).value_or(0),
          f.optional_integer("scored", 0, std::numeric_limits<int64_t>::max()).value_or(0),
          f.optional_integer("samples", 0, std::numeric_limits<int64_t>::max()).value_or(0)};
}

json text_json(const MeasuredText& t) {
  return {{"source", t.source},
          {"hash", t.hash},
          {"tokens", t.tokens},
          {"scored", t.scored},
          {"samples", t.samples}};
}

PlanQuality read_quality(const JsonFields& q) {
  PlanQuality r;
  r.metric = q.optional_string("metric").value_or("");
  r.mean_kl = q.optional_number("mean_kl");
  r.top1_agreement = q.optional_number("top1_agreement");
  r.ppl = q.optional_number("ppl");
  r.ppl_exact_kv = q.optional_number("ppl_exact_kv");
  r.predicted_error = q.optional_number("predicted_error");
  r.validated = q.optional_boolean("validated").value_or(false);
  r.chosen_as = q.optional_string("chosen_as").value_or("");
  if (const auto d = q.optional_object("data")) r.data = read_text(*d);
  if (const auto s = q.optional_object("selection")) r.selection = read_text(*s);
  r.selection_mean_kl = q.optional_number("selection_mean_kl");
  r.rank_correlation = q.optional_number("rank_correlation_predicted_measured");
  r.rank_correlation_on_report = q.optional_number("rank_correlation_on_report");
  if (const auto b = q.optional_object("best_uniform")) {
    r.best_uniform =
        BestUniform{b->string("kv"), b->number("mean_kl"),
                    KlDifference{b->number("kl_difference"), b->number("kl_difference_low"),
                                 b->number("kl_difference_high"), ""},
                    b->number("ratio")};
  }
  if (const auto h = q.optional_object("allocation_headroom")) {
    r.headroom = AllocationHeadroom{h->number("best_plan_predicted"), h->string("best_uniform"),
                                    h->number("best_uniform_predicted"), h->number("ratio")};
  }
  if (const auto compared = q.optional_array("compared_plans")) {
    for (size_t i = 0; i < compared->size(); ++i) {
      const JsonFields c = compared->element(i);
      r.compared_plans.push_back(
          {c.string("source"), c.string("granularity"), c.number("bytes_per_token", 0.0),
           c.number("mean_kl", 0.0), c.number("top1_agreement", 0.0),
           KlDifference{c.number("kl_difference"), c.number("kl_difference_low"),
                        c.number("kl_difference_high"), c.string("verdict")}});
    }
  }
  if (const auto lc = q.optional_object("long_context")) {
    LongContextQuality l;
    l.protocol = lc->optional_string("protocol").value_or("");
    l.stream_tokens =
        lc->optional_integer("stream_tokens", 0, std::numeric_limits<int64_t>::max()).value_or(0);
    l.baseline = lc->string("baseline");
    const JsonFields rows = lc->array("rows");
    for (size_t i = 0; i < rows.size(); ++i) {
      const JsonFields row = rows.element(i);
      l.rows.push_back({static_cast<int>(row.integer("ctx", 1, std::numeric_limits<int>::max())),
                        static_cast<int>(row.integer("chunks", 0, std::numeric_limits<int>::max())),
                        row.integer("scored", 0, std::numeric_limits<int64_t>::max()),
                        row.number("plan_mean_kl"), row.number("baseline_mean_kl")});
    }
    r.long_context = std::move(l);
  }
  return r;
}

json quality_json(const PlanQuality& q) {
  json j = json::object();
  put(j, "metric", q.metric);
  put(j, "mean_kl", q.mean_kl);
  put(j, "top1_agreement", q.top1_agreement);
  put(j, "ppl", q.ppl);
  put(j, "ppl_exact_kv", q.ppl_exact_kv);
  put(j, "predicted_error", q.predicted_error);
  put(j, "chosen_as", q.chosen_as);
  if (q.data) j["data"] = text_json(*q.data);
  if (q.selection) {
    j["selection"] = text_json(*q.selection);
    j["rank_correlation_predicted_measured"] =
        q.rank_correlation ? json(*q.rank_correlation) : json();
  }
  put(j, "selection_mean_kl", q.selection_mean_kl);
  put(j, "rank_correlation_on_report", q.rank_correlation_on_report);
  if (q.best_uniform) {
    const BestUniform& b = *q.best_uniform;
    j["best_uniform"] = {{"kv", b.kv},
                         {"mean_kl", b.mean_kl},
                         {"kl_difference", b.difference.plan_minus_baseline},
                         {"kl_difference_low", b.difference.low},
                         {"kl_difference_high", b.difference.high},
                         {"ratio", b.ratio}};
  }
  if (q.headroom) {
    const AllocationHeadroom& h = *q.headroom;
    j["allocation_headroom"] = {{"best_plan_predicted", h.best_plan_predicted},
                                {"best_uniform", h.best_uniform},
                                {"best_uniform_predicted", h.best_uniform_predicted},
                                {"ratio", h.ratio}};
  }
  if (q.long_context) {
    json rows = json::array();
    for (const LongContextRow& r : q.long_context->rows) {
      rows.push_back({{"ctx", r.ctx},
                      {"chunks", r.chunks},
                      {"scored", r.scored},
                      {"plan_mean_kl", r.plan_mean_kl},
                      {"baseline_mean_kl", r.baseline_mean_kl}});
    }
    j["long_context"] = {{"protocol", q.long_context->protocol},
                         {"stream_tokens", q.long_context->stream_tokens},
                         {"baseline", q.long_context->baseline},
                         {"rows", rows}};
  }
  if (!q.compared_plans.empty()) {
    json compared = json::array();
    for (const ComparedPlan& c : q.compared_plans) {
      compared.push_back({{"source", c.source},
                          {"granularity", c.granularity},
                          {"bytes_per_token", c.bytes_per_token},
                          {"mean_kl", c.mean_kl},
                          {"top1_agreement", c.top1_agreement},
                          {"kl_difference", c.difference.plan_minus_baseline},
                          {"kl_difference_low", c.difference.low},
                          {"kl_difference_high", c.difference.high},
                          {"verdict", c.difference.verdict}});
    }
    j["compared_plans"] = compared;
  }
  // A plan nothing was measured for keeps an empty section.
  if (q.validated || !j.empty()) j["validated"] = q.validated;
  return j;
}

// Baselines

UniformBaseline read_baseline(const JsonFields& b) {
  UniformBaseline u;
  u.kv = b.string("kv");
  const KvPair pair = [&] {
    try {
      return KvPair::parse(u.kv);
    } catch (const std::exception& e) {
      b.invalid("kv", e.what());
    }
  }();
  u.key = b.optional_string("key").value_or(pair.key.name());
  u.value = b.optional_string("value").value_or(pair.value.name());
  u.equivalent_bits = b.optional_number("equivalent_bits").value_or(0);
  u.effective_bits = b.optional_number("effective_bits").value_or(0);
  u.bytes_per_token = b.optional_number("bytes_per_token").value_or(0);
  u.within_budget = b.optional_boolean("within_budget").value_or(false);
  u.predicted_error = b.optional_number("predicted_error");
  u.mean_kl = b.optional_number("mean_kl");
  u.top1_agreement = b.optional_number("top1_agreement");
  u.ppl = b.optional_number("ppl");
  if (const auto k = b.optional_object("kl_difference")) {
    u.kl_difference = KlDifference{k->number("plan_minus_baseline"), k->number("low"),
                                   k->number("high"), k->optional_string("verdict").value_or("")};
  }
  if (const auto why = b.optional_array("measured_because")) {
    for (size_t i = 0; i < why->size(); ++i) u.measured_because.push_back(why->string_at(i));
  }
  return u;
}

json baseline_json(const UniformBaseline& u) {
  json j = {{"kv", u.kv},
            {"key", u.key},
            {"value", u.value},
            {"equivalent_bits", u.equivalent_bits},
            {"effective_bits", u.effective_bits},
            {"bytes_per_token", u.bytes_per_token},
            {"within_budget", u.within_budget}};
  put(j, "predicted_error", u.predicted_error);
  put(j, "mean_kl", u.mean_kl);
  put(j, "top1_agreement", u.top1_agreement);
  put(j, "ppl", u.ppl);
  if (u.kl_difference) {
    j["kl_difference"] = {{"plan_minus_baseline", u.kl_difference->plan_minus_baseline},
                          {"low", u.kl_difference->low},
                          {"high", u.kl_difference->high},
                          {"verdict", u.kl_difference->verdict}};
  }
  if (!u.measured_because.empty()) j["measured_because"] = u.measured_because;
  return j;
}

std::vector<UniformBaseline> read_baselines(const JsonFields& a) {
  std::vector<UniformBaseline> out;
  for (size_t i = 0; i < a.size(); ++i) out.push_back(read_baseline(a.element(i)));
  return out;
}

json baselines_json(const std::vector<UniformBaseline>& v) {
  json a = json::array();
  for (const UniformBaseline& u : v) a.push_back(baseline_json(u));
  return a;
}

// Front

ParetoPoint read_front_point(const JsonFields& p) {
  ParetoPoint f;
  f.source = p.optional_string("source").value_or("");
  f.memory = p.number("memory");
  f.predicted_error = p.number("predicted_error");
  f.equivalent_bits = p.optional_number("equivalent_bits");
  f.bytes_per_token = p.optional_number("bytes_per_token");
  f.mean_kl = p.optional_number("mean_kl");
  if (const auto layers = p.optional_array("layers")) {
    for (size_t i = 0; i < layers->size(); ++i) f.layers.push_back(layers->string_at(i));
  }
  return f;
}

json front_point_json(const ParetoPoint& f) {
  json j = {{"memory", f.memory}, {"predicted_error", f.predicted_error}};
  put(j, "source", f.source);
  put(j, "equivalent_bits", f.equivalent_bits);
  put(j, "bytes_per_token", f.bytes_per_token);
  put(j, "mean_kl", f.mean_kl);
  if (!f.layers.empty()) j["layers"] = f.layers;
  return j;
}

// Provenance

SearchProvenance read_provenance(const JsonFields& p) {
  SearchProvenance r;
  r.algorithm = p.optional_string("algorithm").value_or("");
  r.sensitivity = p.optional_string("sensitivity").value_or("");
  r.memory_measure = p.optional_string("memory_measure").value_or("");
  r.budget = p.optional_string("budget").value_or("");
  r.clustering = p.optional_string("clustering").value_or("");
  r.engine = p.optional_string("engine").value_or("");
  r.engine_structure = p.optional_string("engine_structure").value_or("");
  r.granularity = p.optional_string("granularity").value_or("");
  r.budget_value = p.optional_number("budget_value");
  r.seed = optional_count(p, "seed");
  r.population = optional_count(p, "population");
  r.generations = optional_count(p, "generations");
  r.islands = optional_count(p, "islands");
  r.surrogate_evaluations = optional_count(p, "surrogate_evaluations");
  r.real_evaluations = optional_count(p, "real_evaluations");
  r.selection_evaluations = optional_count(p, "selection_evaluations");
  r.report_evaluations = optional_count(p, "report_evaluations");
  r.validation_rounds = optional_count(p, "validation_rounds");
  r.exact_front_points = optional_count(p, "exact_front_points");
  r.exact_front_states = optional_count(p, "exact_front_states");
  r.nsga2_front_points = optional_count(p, "nsga2_front_points");
  r.unseeded_nsga2_coverage_of_exact_front =
      p.optional_number("unseeded_nsga2_coverage_of_exact_front");
  if (const auto d = p.optional_object("dbscan")) {
    r.dbscan_eps = d->optional_number("eps");
    r.dbscan_min_samples = d->optional_integer("min_samples", 0, std::numeric_limits<int>::max());
  }
  if (const auto groups = p.optional_array("groups")) {
    for (size_t g = 0; g < groups->size(); ++g) {
      const JsonFields group = groups->element(g);
      const JsonFields layers = group.array("layers");
      SearchGroupRecord record;
      for (size_t i = 0; i < layers.size(); ++i) {
        record.layers.push_back(
            static_cast<int>(layers.integer_at(i, 0, std::numeric_limits<int>::max())));
      }
      record.side = group.optional_string("side").value_or("");
      if (!record.side.empty() && record.side != "keys" && record.side != "values") {
        group.invalid("side",
                      fmt::format("is \"{}\", expected \"keys\" or \"values\"", record.side));
      }
      r.groups.push_back(std::move(record));
    }
  }
  if (const auto v = p.optional_array("validations")) {
    for (size_t i = 0; i < v->size(); ++i) {
      const JsonFields e = v->element(i);
      r.validations.push_back(
          {static_cast<int>(e.integer("round", 0, std::numeric_limits<int>::max())),
           e.optional_string("plan").value_or(""), e.number("memory"), e.number("predicted_error"),
           e.number("mean_kl")});
    }
  }
  if (const auto rounds = p.optional_array("rounds")) {
    for (size_t i = 0; i < rounds->size(); ++i) {
      const JsonFields e = rounds->element(i);
      r.rounds.push_back(
          {static_cast<int>(e.integer("round", 1, std::numeric_limits<int>::max())),
           static_cast<int>(e.integer("measured", 0, std::numeric_limits<int>::max())),
           e.number("best_mean_kl"), e.optional_number("held_out_rank_correlation"),
           e.optional_string("next").value_or("")});
    }
  }
  if (const auto u = p.optional_array("uniform_not_measured_on_report")) {
    r.uniform_not_measured_on_report = read_baselines(*u);
  }
  if (const auto w = p.optional_array("surrogate_weights")) {
    for (size_t i = 0; i < w->size(); ++i) r.surrogate_weights.push_back(w->number_at(i));
  }
  r.surrogate_interaction = p.optional_number("surrogate_interaction");
  if (const auto pr = p.optional_object("profile")) {
    r.profile = ProfileRecord{
        pr->optional_string("hash").value_or(""),
        pr->optional_string("calibration_hash").value_or(""),
        pr->optional_integer("calibration_tokens", 0, std::numeric_limits<int64_t>::max())
            .value_or(0),
        pr->optional_boolean("chunk_attends_quantized")};
  }
  if (const auto b = p.optional_object("build")) r.build = build_record_from_json(*b);
  if (const auto t = p.optional_integer("threads", 1, std::numeric_limits<int>::max())) {
    r.threads = static_cast<int>(*t);
  }
  return r;
}

}  // namespace

json provenance_to_json(const SearchProvenance& p) {
  json j = json::object();
  put(j, "algorithm", p.algorithm);
  put(j, "sensitivity", p.sensitivity);
  put(j, "memory_measure", p.memory_measure);
  put(j, "budget", p.budget);
  put(j, "clustering", p.clustering);
  put(j, "engine", p.engine);
  put(j, "engine_structure", p.engine_structure);
  put(j, "granularity", p.granularity);
  j["budget_value"] = p.budget_value ? json(*p.budget_value) : json();
  put(j, "seed", p.seed);
  put(j, "population", p.population);
  put(j, "generations", p.generations);
  put(j, "islands", p.islands);
  put(j, "surrogate_evaluations", p.surrogate_evaluations);
  put(j, "real_evaluations", p.real_evaluations);
  put(j, "selection_evaluations", p.selection_evaluations);
  put(j, "report_evaluations", p.report_evaluations);
  put(j, "validation_rounds", p.validation_rounds);
  put(j, "exact_front_points", p.exact_front_points);
  put(j, "exact_front_states", p.exact_front_states);
  put(j, "nsga2_front_points", p.nsga2_front_points);
  put(j, "unseeded_nsga2_coverage_of_exact_front", p.unseeded_nsga2_coverage_of_exact_front);
  if (p.dbscan_eps || p.dbscan_min_samples) {
    json d = json::object();
    put(d, "eps", p.dbscan_eps);
    put(d, "min_samples", p.dbscan_min_samples);
    j["dbscan"] = d;
  }
  json groups = json::array();
  for (const SearchGroupRecord& g : p.groups) {
    json group = {{"layers", g.layers}};
    if (!g.side.empty()) group["side"] = g.side;
    groups.push_back(std::move(group));
  }
  j["groups"] = groups;
  json validations = json::array();
  for (const ValidatedPlan& v : p.validations) {
    json e = {{"round", v.round},
              {"memory", v.memory},
              {"predicted_error", v.predicted_error},
              {"mean_kl", v.mean_kl}};
    put(e, "plan", v.plan);
    validations.push_back(std::move(e));
  }
  j["validations"] = validations;
  if (!p.rounds.empty()) {
    json rounds = json::array();
    for (const ValidationRoundRecord& v : p.rounds) {
      rounds.push_back({{"round", v.round},
                        {"measured", v.measured},
                        {"best_mean_kl", v.best_mean_kl},
                        {"held_out_rank_correlation",
                         v.held_out_rank_correlation ? json(*v.held_out_rank_correlation) : json()},
                        {"next", v.next}});
    }
    j["rounds"] = rounds;
  }
  j["uniform_not_measured_on_report"] = baselines_json(p.uniform_not_measured_on_report);
  j["surrogate_weights"] = p.surrogate_weights;
  put(j, "surrogate_interaction", p.surrogate_interaction);
  if (p.profile) {
    j["profile"] = {{"hash", p.profile->hash},
                    {"calibration_hash", p.profile->calibration_hash},
                    {"calibration_tokens", p.profile->calibration_tokens}};
    put(j["profile"], "chunk_attends_quantized", p.profile->chunk_attends_quantized);
  }
  if (p.build) j["build"] = json(build_record_to_json(*p.build));
  put(j, "threads", p.threads);
  return j;
}

PlanResults results_from_json(const json& j, const std::string& source) {
  const JsonFields root(j, source);
  PlanResults r;
  if (const auto q = root.optional_object("quality")) r.quality = read_quality(*q);
  if (const auto f = root.optional_array("pareto_front")) {
    for (size_t i = 0; i < f->size(); ++i)
      r.pareto_front.push_back(read_front_point(f->element(i)));
  }
  if (const auto b = root.optional_array("baselines")) r.baselines = read_baselines(*b);
  if (const auto p = root.optional_object("provenance")) r.provenance = read_provenance(*p);
  return r;
}

void results_to_json(const PlanResults& r, json& j) {
  j["quality"] = quality_json(r.quality);
  json front = json::array();
  for (const ParetoPoint& f : r.pareto_front) front.push_back(front_point_json(f));
  j["pareto_front"] = front;
  j["baselines"] = baselines_json(r.baselines);
  j["provenance"] = provenance_to_json(r.provenance);
}

double surrogate_prediction(const std::vector<double>& weights, double interaction,
                            const std::vector<double>& layer_errors) {
  double weighted = 0, raw = 0;
  for (size_t l = 0; l < layer_errors.size(); ++l) {
    weighted += weights[l] * layer_errors[l];
    raw += layer_errors[l];
  }
  return weighted + interaction * raw * raw;
}

}  // namespace kvplan
