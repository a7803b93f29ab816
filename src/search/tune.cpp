#include "search/tune.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/hash.h"
#include "formats/kv_bytes.h"
#include "profile/profile_hash.h"
#include "search/engine_space.h"
#include "search/exact_front.h"
#include "search/paired_stats.h"
#include "search/pareto.h"

namespace kvplan::search {
namespace {

using nlohmann::json;

KvGeometry profile_geometry(const Profile& p) {
  KvGeometry g;
  g.model_name = p.model.name;
  for (int l = 0; l < p.model.num_layers; ++l) {
    g.layers.push_back({p.model.num_kv_heads[static_cast<size_t>(l)], p.model.head_dim, 0});
  }
  return g;
}

std::vector<std::string> pair_names(const std::vector<KvPair>& pairs) {
  std::vector<std::string> names;
  for (const KvPair& p : pairs) names.push_back(p.name());
  return names;
}

// Fraction of the exact front's points an NSGA-II run without seeds gets within 0.5 % of (error)
// at no more memory: how much the exact solver adds over the evolutionary search alone.
double unseeded_coverage(const SearchSpace& space, const Nsga2Options& options) {
  SearchSpace additive = space;
  additive.interaction = 0;
  const ExactFront exact = exact_front(additive, SearchTable::build(additive));
  const SearchResult nsga = nsga2_front(additive, options);
  if (exact.points.empty()) return 1.0;
  size_t covered = 0;
  for (const Assignment& e : exact.points) {
    for (const Assignment& a : nsga.front) {
      if (a.memory <= e.memory * (1 + 1e-12) && a.predicted_error <= e.predicted_error * 1.005) {
        ++covered;
        break;
      }
    }
  }
  return static_cast<double>(covered) / static_cast<double>(exact.points.size());
}

MeasuredText measured_text(const TextSet& set) {
  return {set.source, hash_hex(set.hash), set.kl->n_tokens(), set.kl->n_scored(),
          static_cast<int64_t>(set.kl->n_prompts())};
}

}  // namespace

TuneOutput tune_plan(const Profile& profile, const TextSet& selection, const TextSet& report,
                     const TuneOptions& given) {
  TuneOptions options = given;
  if (options.max_effective_bits > 0) {
    options.measure = MemoryMeasure::kBytes;
    options.budget =
        options.max_effective_bits * kv_values_per_token(profile_geometry(profile)) / 8;
    options.budget_description += fmt::format(" = {:.1f} bytes per token", options.budget);
  }
  TuneOutput out;
  std::vector<LayerCandidates> all = candidates_from_profile(profile, options.metric);
  if (!options.layer_token_share.empty()) {
    if (options.layer_token_share.size() != all.size()) {
      fail(ErrorCode::kInternal, "{} layer token shares for {} layers",
           options.layer_token_share.size(), all.size());
    }
    for (size_t l = 0; l < all.size(); ++l) {
      for (LayerCandidate& c : all[l].candidates) c.bytes_per_token *= options.layer_token_share[l];
    }
  }
  const EngineSpec& engine = engine_spec(options.engine);
  const int head_dim = common_head_dim(profile_geometry(profile));
  EngineSpace engine_space =
      engine_search_space(all, engine, head_dim, options.measure, options.budget);
  SearchSpace space = std::move(engine_space.space);
  if (engine.id != EngineId::kKvplan) {
    spdlog::info("--engine {}: {} ({} structures priced)", engine.name, engine_space.structure,
                 engine_space.structures_priced);
  }
  {
    const double floor = minimum_memory(space, SearchTable::build(space));
    const std::string boundary_note = boundary_layers_note(engine, static_cast<int>(all.size()));
    if (floor > options.budget * (1 + 1e-12)) {
      fail(ErrorCode::kInvalidArgument,
           "budget {}: the smallest possible plan takes {} {} (every layer in its smallest "
           "candidate{})",
           options.budget_description, floor,
           options.measure == MemoryMeasure::kBytes ? "bytes per token" : "equivalent bits",
           boundary_note.empty() ? "" : "; " + boundary_note);
    }
  }

  // Layer clustering, priced against the exact per-layer front at the budget.
  out.groups = space.groups;
  if (options.cluster != ClusterMode::kOff && engine_space.may_cluster) {
    SearchSpace grouped = space;
    grouped.groups = group_layers(space.layers, options.dbscan);
    const double exact = best_error_within_budget(space);
    const double clustered = best_error_within_budget(grouped);
    const double cost = exact > 0 ? clustered / exact - 1 : 0;
    const bool use = options.cluster == ClusterMode::kOn ||
                     (cost < 0.01 && grouped.groups.size() < space.groups.size());
    out.cluster_note = fmt::format(
        "DBSCAN groups {} layers into {} groups; at the budget their best predicted error is "
        "{:+.2f} % against the exact per-layer front: {}",
        space.layers.size(), grouped.groups.size(), 100 * cost, use ? "used" : "not used");
    spdlog::info("{}", out.cluster_note);
    if (use) space.groups = grouped.groups, out.groups = grouped.groups;
  }

  // Every real evaluation goes through one cache per text set.
  std::map<std::vector<std::string>, HeldOutKl::Result> on_selection, on_report;
  const auto measure_on = [](const TextSet& set, auto& cache,
                             const std::vector<KvPair>& pairs) -> const HeldOutKl::Result& {
    const std::vector<std::string> key = pair_names(pairs);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, set.kl->measure(pairs)).first;
    return it->second;
  };

  // The best-predicted uniform configurations compete with the searched plans on selection.
  const std::vector<UniformConfig> uniforms = uniform_configs(all);
  const auto memory_of_uniform = [&](const UniformConfig& u) {
    return options.measure == MemoryMeasure::kBytes ? u.bytes_per_token : u.equivalent_bits;
  };
  std::vector<ExtraPlan> extra;
  for (const UniformConfig& u : uniforms) {
    if (static_cast<int>(extra.size()) == options.uniform_validations) break;
    if (memory_of_uniform(u) > options.budget * (1 + 1e-12)) continue;
    if (!engine_runs_uniform(engine, u.pair, static_cast<int>(all.size()), head_dim)) continue;
    extra.push_back({"uniform " + u.pair.name(), std::vector<KvPair>(all.size(), u.pair),
                     memory_of_uniform(u), u.layer_errors});
  }
  out.loop = run_validation_loop(
      space, options.search,
      [&](const std::vector<KvPair>& p) { return measure_on(selection, on_selection, p).mean_kl; },
      options.loop, extra);
  {
    std::vector<double> predicted, measured;
    for (const MeasuredPlan& m : out.loop.measured) {
      predicted.push_back(m.assignment.predicted_error);
      measured.push_back(m.measured);
    }
    out.rank_correlation = spearman_rank_correlation(predicted, measured);
  }
  SearchSpace final_space = space;
  final_space.layer_weights = out.loop.surrogate.weights;
  final_space.interaction = out.loop.surrogate.interaction;
  out.nsga_exact_coverage = unseeded_coverage(final_space, options.search);

  // The report text: the chosen plan and the uniform baselines, never used to choose.
  const MeasuredPlan& chosen = out.loop.chosen;
  out.plan_report = measure_on(report, on_report, chosen.assignment.pairs);
  std::set<std::string> to_measure;
  int by_prediction = 0;
  for (const UniformConfig& u : uniforms) {
    if (memory_of_uniform(u) > options.budget * (1 + 1e-12)) continue;
    if (options.report_baselines == 0 || by_prediction < options.report_baselines) {
      to_measure.insert(u.pair.name());
      ++by_prediction;
    }
  }
  for (const std::string& name : options.reference_baselines)
    to_measure.insert(KvPair::parse(name).name());
  for (const MeasuredPlan& m : out.loop.measured) {
    if (!m.name.empty()) to_measure.insert(m.assignment.pairs.front().name());
  }
  for (const UniformConfig& u : uniforms) {
    BaselineResult b;
    b.config = u;
    b.within_budget = memory_of_uniform(u) <= options.budget * (1 + 1e-12);
    b.measured = b.within_budget && to_measure.contains(u.pair.name());
    if (b.measured) {
      b.report = measure_on(report, on_report, std::vector<KvPair>(all.size(), u.pair));
      const PairedInterval ci = paired_bootstrap(out.plan_report.kl_sums, b.report.kl_sums,
                                                 out.plan_report.scored_per_prompt,
                                                 options.bootstrap_resamples, options.search.seed);
      b.diff = ci.mean_difference;
      b.diff_low = ci.low;
      b.diff_high = ci.high;
    }
    out.baselines.push_back(std::move(b));
  }

  // plan.json
  Plan& plan = out.plan;
  plan.tool_version = options.tool_version;
  plan.created = options.created;
  plan.model.name = profile.model.name;
  plan.model.architecture = profile.model.architecture;
  plan.model.fingerprint = profile.model.fingerprint;
  plan.model.num_attention_heads = profile.model.num_attention_heads;
  plan.model.geometry = profile_geometry(profile);
  plan.quantization = profile.quantization;
  std::map<int, int> group_of_layer;
  for (size_t g = 0; g < out.groups.size(); ++g) {
    // A layer in a key group and a value group is listed under its key group.
    for (int l : out.groups[g].layers) group_of_layer.emplace(l, static_cast<int>(g));
  }
  for (size_t i = 0; i < space.layers.size(); ++i) {
    const int l = space.layers[i].layer;
    const KvPair& pair = chosen.assignment.pairs[i];
    plan.layers.push_back({l, group_of_layer.at(l), pair, profile.fp8_scales(l, pair)});
  }

  const BaselineResult* best = nullptr;
  for (const BaselineResult& b : out.baselines) {
    if (b.measured && (best == nullptr || b.report.mean_kl < best->report.mean_kl)) best = &b;
  }
  const HeldOutKl::Result& q = out.plan_report;
  const HeldOutKl::Result& qs = on_selection.at(pair_names(chosen.assignment.pairs));
  PlanQuality& quality = plan.results.quality;
  quality.metric = "mean KL(exact || quantized) of next-token distributions, nats";
  quality.mean_kl = q.mean_kl;
  quality.top1_agreement = q.top1_agreement;
  quality.ppl = q.ppl;
  quality.ppl_exact_kv = q.ppl_exact;
  quality.predicted_error = chosen.assignment.predicted_error;
  quality.validated = true;
  quality.chosen_as = chosen.name.empty() ? "searched plan" : chosen.name;
  quality.data = measured_text(report);
  quality.selection = measured_text(selection);
  quality.selection_mean_kl = qs.mean_kl;
  if (std::isfinite(out.rank_correlation)) quality.rank_correlation = out.rank_correlation;
  if (best != nullptr) {
    quality.best_uniform =
        BestUniform{best->config.pair.name(), best->report.mean_kl,
                    KlDifference{best->diff, best->diff_low, best->diff_high, ""},
                    q.mean_kl / best->report.mean_kl};
  }

  if (best != nullptr && report.long_context != nullptr &&
      !report.long_context->contexts().empty()) {
    out.long_context = report.long_context->measure(
        {chosen.assignment.pairs, std::vector<KvPair>(all.size(), best->config.pair)});
    LongContextQuality lc;
    lc.protocol =
        "the report text's samples joined into one stream, chunks of ctx tokens, BOS first, "
        "second half scored (llama-perplexity)";
    lc.stream_tokens = report.long_context->n_tokens();
    lc.baseline = best->config.pair.name();
    for (const LongContextKl::Row& r : out.long_context) {
      lc.rows.push_back({r.ctx, r.chunks, r.scored, r.mean_kl[0], r.mean_kl[1]});
    }
    quality.long_context = std::move(lc);
  }

  const double values = kv_values_per_token(profile_geometry(profile));
  std::vector<UniformBaseline> listed;
  for (const BaselineResult& b : out.baselines) {
    if (!b.within_budget) continue;
    UniformBaseline entry{.kv = b.config.pair.name(),
                          .key = b.config.pair.key.name(),
                          .value = b.config.pair.value.name(),
                          .equivalent_bits = b.config.equivalent_bits,
                          .effective_bits = 8 * b.config.bytes_per_token / values,
                          .bytes_per_token = b.config.bytes_per_token,
                          .within_budget = true,
                          .predicted_error = b.config.predicted_error};
    if (!b.measured) {
      listed.push_back(std::move(entry));
      continue;
    }
    entry.mean_kl = b.report.mean_kl;
    entry.top1_agreement = b.report.top1_agreement;
    entry.ppl = b.report.ppl;
    entry.kl_difference = KlDifference{b.diff, b.diff_low, b.diff_high, b.verdict()};
    plan.results.baselines.push_back(std::move(entry));
  }

  // The fronts: exact (additive surrogate) and NSGA-II's (corrected surrogate), last round.
  const auto front_point = [&](const Assignment& a, const char* source) {
    double bits = 0, bytes = 0;
    for (size_t i = 0; i < space.layers.size(); ++i) {
      for (const LayerCandidate& c : space.layers[i].candidates) {
        if (c.pair == a.pairs[i]) {
          bits += c.bits;
          bytes += c.bytes_per_token;
        }
      }
    }
    ParetoPoint point{.source = source,
                      .memory = a.memory,
                      .predicted_error = a.predicted_error,
                      .equivalent_bits = bits / static_cast<double>(space.layers.size()),
                      .bytes_per_token = bytes};
    if (const auto it = on_selection.find(pair_names(a.pairs)); it != on_selection.end()) {
      point.mean_kl = it->second.mean_kl;
      point.layers = pair_names(a.pairs);
    }
    return point;
  };
  for (const Assignment& a : out.loop.exact.points)
    plan.results.pareto_front.push_back(front_point(a, "exact"));
  for (const Assignment& a : out.loop.nsga.front)
    plan.results.pareto_front.push_back(front_point(a, "nsga2"));

  SearchProvenance& pv = plan.results.provenance;
  pv.algorithm =
      "exact front of the additive surrogate (multiple-choice knapsack DP) + NSGA-II (pagmo2) "
      "on the corrected surrogate, validated on the selection text";
  pv.sensitivity = options.metric == SensitivityMetric::kDkl ? "dkl" : "e_o";
  pv.memory_measure =
      options.measure == MemoryMeasure::kBits ? "equivalent_bits" : "bytes_per_token";
  pv.budget = options.budget_description;
  if (std::isfinite(options.budget)) pv.budget_value = options.budget;
  pv.seed = options.search.seed;
  pv.population = options.search.population;
  pv.generations = options.search.generations;
  pv.islands = options.search.islands;
  pv.surrogate_evaluations = out.loop.search_evaluations;
  pv.real_evaluations = on_selection.size() + on_report.size();
  pv.selection_evaluations = on_selection.size();
  pv.report_evaluations = on_report.size();
  pv.validation_rounds = static_cast<uint64_t>(out.loop.rounds);
  pv.exact_front_points = out.loop.exact.points.size();
  pv.exact_front_states = out.loop.exact.states;
  pv.nsga2_front_points = out.loop.nsga.front.size();
  pv.unseeded_nsga2_coverage_of_exact_front = out.nsga_exact_coverage;
  pv.clustering = out.cluster_note.empty() ? "off" : out.cluster_note;
  if (engine.id != EngineId::kKvplan) {
    pv.engine = engine.name;
    pv.engine_structure = engine_space.structure;
  }
  pv.dbscan_eps = options.dbscan.eps;
  pv.dbscan_min_samples = options.dbscan.min_samples;
  for (const LayerGroup& g : out.groups) pv.groups.push_back({g.layers, side_name(g.side)});
  for (const MeasuredPlan& m : out.loop.measured) {
    pv.validations.push_back({m.round, m.name.empty() ? "searched" : m.name, m.assignment.memory,
                              m.assignment.predicted_error, m.measured});
  }
  pv.uniform_not_measured_on_report = std::move(listed);
  pv.surrogate_weights = out.loop.surrogate.weights;
  pv.surrogate_interaction = out.loop.surrogate.interaction;
  pv.profile = ProfileRecord{profile_hash(profile), profile.calibration.hash,
                             profile.calibration.tokens, profile.chunk_attends_quantized};
  return out;
}

}  // namespace kvplan::search
