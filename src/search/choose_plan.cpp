#include "search/choose_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "search/engine_space.h"
#include "search/exact_front.h"
#include "search/paired_stats.h"

namespace kvplan::search {
namespace {

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
      if (within_budget(a.memory, e.memory) && a.predicted_error <= e.predicted_error * 1.005) {
        ++covered;
        break;
      }
    }
  }
  return static_cast<double>(covered) / static_cast<double>(exact.points.size());
}

void check_profile_is_of(const Profile& profile, const KvModel& model) {
  if (profile.model.fingerprint != model.fingerprint) {
    fail(ErrorCode::kInvalidArgument,
         "the profile was made for model fingerprint {} ({}), the model given has {}",
         profile.model.fingerprint, profile.model.name, model.fingerprint);
  }
}

}  // namespace

SearchOutcome choose_plan(const SearchInputs& in) {
  const Profile& profile = *in.profile;
  const Budget& budget = in.budget;
  const SearchOptions& options = in.options;
  check_profile_is_of(profile, in.model);
  SearchOutcome out;
  std::vector<LayerCandidates> all =
      candidates_from_profile(profile, options.metric, options.granularity);
  if (!budget.layer_token_share.empty()) {
    if (budget.layer_token_share.size() != static_cast<size_t>(profile.n_layers())) {
      fail(ErrorCode::kInternal, "{} layer token shares for {} layers",
           budget.layer_token_share.size(), profile.n_layers());
    }
    for (LayerCandidates& entry : all) {
      const double share = budget.layer_token_share[static_cast<size_t>(entry.layer_of_model())];
      for (LayerCandidate& c : entry.candidates) c.bytes_per_token *= share;
    }
  }
  const EngineSpec& engine = engine_spec(options.engine);
  if (options.granularity == KvGranularity::kHead) {
    size_t apportioned = 0;
    for (int l = 0; l < profile.n_layers(); ++l) {
      for (size_t c = 0; c < profile.candidates.size(); ++c) {
        const CellMetrics& m = profile.cell(l, c)->metrics;
        apportioned += !m.o_mse_heads.empty() && m.dkl_heads.empty();
      }
    }
    if (apportioned > 0) {
      spdlog::warn(
          "--per-head: {} profile cells have no per-head dKL (profile with --per-head-dkl, or "
          "tune --per-head): their dKL is apportioned by the heads' shares of o_mse",
          apportioned);
    }
  }
  if (options.granularity == KvGranularity::kHead && engine.id != EngineId::kKvplan) {
    fail(ErrorCode::kInvalidArgument,
         "--per-head: {} takes one format per layer; per-KV-head plans are kvplan's own (search "
         "per head without --engine, then `kvplan export` lists what {} loses)",
         engine.name, engine.name);
  }
  const int head_dim = common_head_dim(in.model.geometry);
  EngineSpace engine_space =
      engine_search_space(all, engine, head_dim, budget.measure, budget.limit);
  SearchSpace& space = out.space;
  space = std::move(engine_space.space);
  if (engine.id != EngineId::kKvplan) {
    out.structure = engine_space.structure;
    spdlog::info("--engine {}: {} ({} structures priced)", engine.name, engine_space.structure,
                 engine_space.structures_priced);
  }
  budget.require_at_least(minimum_memory(space, SearchTable::build(space)),
                          boundary_layers_note(engine, static_cast<int>(all.size())));

  // The least error the additive surrogate finds within the budget, before any layer grouping:
  // what allocation can reach at all (the headroom below), and what clustering is priced against.
  out.best_plan_predicted = best_error_within_budget(space);

  // Layer clustering, priced against the exact per-layer front at the budget.
  if (options.cluster != ClusterMode::kOff && engine_space.may_cluster) {
    SearchSpace grouped = space;
    grouped.groups = group_layers(space.layers, options.dbscan);
    const double exact = out.best_plan_predicted;
    const double clustered = best_error_within_budget(grouped);
    const double cost = exact > 0 ? clustered / exact - 1 : 0;
    const bool use = options.cluster == ClusterMode::kOn ||
                     (cost < 0.01 && grouped.groups.size() < space.groups.size());
    out.cluster_note = fmt::format(
        "DBSCAN groups {} layers into {} groups; at the budget their best predicted error is "
        "{:+.2f} % against the exact per-layer front: {}",
        space.layers.size(), grouped.groups.size(), 100 * cost, use ? "used" : "not used");
    spdlog::info("{}", out.cluster_note);
    if (use) space.groups = grouped.groups;
  }

  // Every real evaluation goes through one cache per text set. Configurations are measured
  // together where they are known together: a prompt whose exact logits were not kept runs its
  // exact forward once for the batch (the same bits as one at a time).
  const auto measure_all_on = [](const TextSet& set, auto& cache,
                                 const std::vector<std::vector<KvPair>>& configs) {
    std::vector<std::vector<KvPair>> missing;
    for (const std::vector<KvPair>& pairs : configs) {
      if (!cache.contains(pairs) &&
          std::find(missing.begin(), missing.end(), pairs) == missing.end()) {
        missing.push_back(pairs);
      }
    }
    if (missing.empty()) return;
    std::vector<HeldOutKl::Result> results = set.kl->measure_all(missing);
    for (size_t k = 0; k < missing.size(); ++k) cache.emplace(missing[k], std::move(results[k]));
  };
  const auto measure_on = [&](const TextSet& set, auto& cache,
                              const std::vector<KvPair>& pairs) -> const HeldOutKl::Result& {
    measure_all_on(set, cache, {pairs});
    return cache.at(pairs);
  };

  // The best-predicted uniform configurations compete with the searched plans on selection.
  const std::vector<UniformConfig> uniforms = uniform_configs(all);
  const auto memory_of_uniform = [&](const UniformConfig& u) {
    return budget.measure == MemoryMeasure::kBytes ? u.bytes_per_token : u.equivalent_bits;
  };
  // A uniform pair the budget holds and the engine runs: a plan of the searched space.
  const auto eligible = [&](const UniformConfig& u) {
    return budget.fits(memory_of_uniform(u)) &&
           engine_runs_uniform(engine, u.pair, static_cast<int>(all.size()), head_dim);
  };
  for (const UniformConfig& u : uniforms) {
    if (eligible(u)) {
      out.best_predicted_uniform = u;
      spdlog::info(
          "headroom: the best plan within the budget is predicted at {:.6g}, {:.3f}x the best "
          "predicted uniform pair {} ({:.6g}): what allocation among these candidates can gain by "
          "the profile's additive surrogate",
          out.best_plan_predicted, out.best_plan_predicted / u.predicted_error, u.pair.name(),
          u.predicted_error);
      break;
    }
  }
  std::vector<ExtraPlan> extra;
  for (const UniformConfig& u : uniforms) {
    if (static_cast<int>(extra.size()) == options.uniform_validations) break;
    if (!eligible(u)) continue;
    extra.push_back({"uniform " + u.pair.name(), std::vector<KvPair>(all.size(), u.pair),
                     memory_of_uniform(u), u.layer_errors});
  }
  out.loop = run_validation_loop(space, options.nsga2,
                                 MeasureAllFn([&](const std::vector<std::vector<KvPair>>& plans) {
                                   measure_all_on(in.selection, out.on_selection, plans);
                                   std::vector<double> ys;
                                   for (const std::vector<KvPair>& pairs : plans)
                                     ys.push_back(out.on_selection.at(pairs).mean_kl);
                                   return ys;
                                 }),
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
  out.nsga_exact_coverage = unseeded_coverage(final_space, options.nsga2);

  // The report text: the chosen plan and the uniform baselines, never used to choose.
  const MeasuredPlan& chosen = out.loop.chosen;
  std::vector<KvPair> validated_uniforms;
  for (const MeasuredPlan& m : out.loop.measured) {
    if (!m.name.empty()) validated_uniforms.push_back(m.assignment.pairs.front());
  }
  const std::map<KvPair, std::vector<std::string>> to_measure = report_baseline_reasons(
      uniforms, memory_of_uniform, budget, options.report_baselines, validated_uniforms);
  {
    std::vector<std::vector<KvPair>> batch{chosen.assignment.pairs};
    for (const UniformConfig& u : uniforms) {
      if (budget.fits(memory_of_uniform(u)) && to_measure.contains(u.pair)) {
        batch.emplace_back(all.size(), u.pair);
      }
    }
    for (const PlanToCompare& other : options.compare_plans) batch.push_back(other.config);
    spdlog::info("report text: measuring {} configurations ({} tokens each)", batch.size(),
                 in.report.kl->n_tokens());
    measure_all_on(in.report, out.on_report, batch);
  }
  out.plan_report = measure_on(in.report, out.on_report, chosen.assignment.pairs);
  // The plan minus another configuration on the report text, paired prompt by prompt.
  const auto plan_minus = [&](const HeldOutKl::Result& other, double& diff, double& low,
                              double& high) {
    const PairedInterval ci =
        paired_bootstrap(out.plan_report.kl_sums, other.kl_sums, out.plan_report.scored_per_prompt,
                         options.bootstrap_resamples, options.nsga2.seed);
    diff = ci.mean_difference;
    low = ci.low;
    high = ci.high;
  };
  for (const UniformConfig& u : uniforms) {
    BaselineResult b;
    b.config = u;
    b.within_budget = budget.fits(memory_of_uniform(u));
    const auto why = to_measure.find(u.pair);
    b.measured = b.within_budget && why != to_measure.end();
    if (b.measured) {
      b.measured_because = why->second;
      b.report = measure_on(in.report, out.on_report, std::vector<KvPair>(all.size(), u.pair));
      plan_minus(b.report, b.diff, b.diff_low, b.diff_high);
    }
    out.baselines.push_back(std::move(b));
  }
  for (size_t i = 0; i < out.baselines.size(); ++i) {
    const BaselineResult& b = out.baselines[i];
    if (b.measured && (!out.best_baseline ||
                       b.report.mean_kl < out.baselines[*out.best_baseline].report.mean_kl)) {
      out.best_baseline = i;
    }
  }

  // Does the surrogate rank what the report text measures? The final refit's prediction of the
  // plan and of every measured uniform baseline against their mean KL there.
  {
    std::vector<double> predicted, measured;
    if (chosen.name.empty()) {
      predicted.push_back(predict(out.loop.surrogate, layer_errors(space, chosen.assignment)));
      measured.push_back(out.plan_report.mean_kl);
    }
    for (const BaselineResult& b : out.baselines) {
      if (!b.measured) continue;
      predicted.push_back(predict(out.loop.surrogate, b.config.layer_errors));
      measured.push_back(b.report.mean_kl);
    }
    out.rank_correlation_on_report = spearman_rank_correlation(predicted, measured);
  }

  // Other plans on the report text, paired with the chosen one prompt by prompt.
  for (const PlanToCompare& other : options.compare_plans) {
    ComparedPlanResult r{other, measure_on(in.report, out.on_report, other.config)};
    plan_minus(r.report, r.diff, r.diff_low, r.diff_high);
    out.compared.push_back(std::move(r));
  }

  // The plan and the best uniform baseline at long contexts.
  if (out.best_baseline && in.report.long_context != nullptr &&
      !in.report.long_context->contexts().empty()) {
    const KvPair best = out.baselines[*out.best_baseline].config.pair;
    out.long_context = in.report.long_context->measure(
        {chosen.assignment.pairs, std::vector<KvPair>(all.size(), best)});
  }
  return out;
}

}  // namespace kvplan::search
