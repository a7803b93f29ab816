#include "search/plan_record.h"

#include <algorithm>
#include <cmath>
#include <map>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/build_record.h"
#include "core/hash.h"
#include "formats/kv_bytes.h"
#include "profile/profile_hash.h"

namespace kvplan::search {
namespace {

MeasuredText measured_text(const TextSet& set) {
  return {set.source, hash_hex(set.hash), set.kl->n_tokens(), set.kl->n_scored(),
          static_cast<int64_t>(set.kl->n_prompts())};
}

std::vector<std::string> pair_names(const std::vector<KvPair>& pairs) {
  std::vector<std::string> names;
  for (const KvPair& p : pairs) names.push_back(p.name());
  return names;
}

PlanQuality quality_of(const SearchInputs& in, const SearchOutcome& out) {
  const MeasuredPlan& chosen = out.loop.chosen;
  const HeldOutKl::Result& q = out.plan_report;
  PlanQuality quality;
  quality.metric = "mean KL(exact || quantized) of next-token distributions, nats";
  quality.mean_kl = q.mean_kl;
  quality.top1_agreement = q.top1_agreement;
  quality.ppl = q.ppl;
  quality.ppl_exact_kv = q.ppl_exact;
  quality.predicted_error = chosen.assignment.predicted_error;
  quality.validated = true;
  quality.chosen_as = chosen.name.empty() ? "searched plan" : chosen.name;
  quality.data = measured_text(in.report);
  quality.selection = measured_text(in.selection);
  quality.selection_mean_kl = out.on_selection.at(chosen.assignment.pairs).mean_kl;
  if (std::isfinite(out.rank_correlation)) quality.rank_correlation = out.rank_correlation;
  if (std::isfinite(out.rank_correlation_on_report)) {
    quality.rank_correlation_on_report = out.rank_correlation_on_report;
  }
  for (const ComparedPlanResult& c : out.compared) {
    quality.compared_plans.push_back(
        {c.plan.source, c.plan.per_head ? "per KV head" : "per layer", c.plan.bytes_per_token,
         c.report.mean_kl, c.report.top1_agreement,
         KlDifference{c.diff, c.diff_low, c.diff_high, paired_verdict(c.diff_low, c.diff_high)}});
  }
  if (out.best_predicted_uniform && out.best_predicted_uniform->predicted_error > 0 &&
      std::isfinite(out.best_plan_predicted)) {
    const UniformConfig& u = *out.best_predicted_uniform;
    quality.headroom = AllocationHeadroom{out.best_plan_predicted, u.pair.name(), u.predicted_error,
                                          out.best_plan_predicted / u.predicted_error};
  }
  if (!out.best_baseline) return quality;
  const BaselineResult& best = out.baselines[*out.best_baseline];
  quality.best_uniform = BestUniform{best.config.pair.name(), best.report.mean_kl,
                                     KlDifference{best.diff, best.diff_low, best.diff_high, ""},
                                     q.mean_kl / best.report.mean_kl};
  if (!out.long_context.empty()) {
    LongContextQuality lc;
    lc.protocol =
        "the report text's samples joined into one stream, chunks of ctx tokens, BOS first, "
        "second half scored (llama-perplexity)";
    lc.stream_tokens = in.report.long_context->n_tokens();
    lc.baseline = best.config.pair.name();
    for (const LongContextKl::Row& r : out.long_context) {
      lc.rows.push_back({r.ctx, r.chunks, r.scored, r.mean_kl[0], r.mean_kl[1]});
    }
    quality.long_context = std::move(lc);
  }
  return quality;
}

// Measured baselines in the plan's list, the rest within the budget in the provenance's.
void record_baselines(const SearchInputs& in, const SearchOutcome& out, Plan& plan) {
  const double values = kv_values_per_token(in.model.geometry);
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
      plan.results.provenance.uniform_not_measured_on_report.push_back(std::move(entry));
      continue;
    }
    entry.mean_kl = b.report.mean_kl;
    entry.top1_agreement = b.report.top1_agreement;
    entry.ppl = b.report.ppl;
    entry.kl_difference = KlDifference{b.diff, b.diff_low, b.diff_high, b.verdict()};
    entry.measured_because = b.measured_because;
    plan.results.baselines.push_back(std::move(entry));
  }
}

// The fronts: exact (additive surrogate) and NSGA-II's (corrected surrogate), last round.
void record_fronts(const SearchOutcome& out, Plan& plan) {
  const SearchSpace& space = out.space;
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
    if (const auto it = out.on_selection.find(a.pairs); it != out.on_selection.end()) {
      point.mean_kl = it->second.mean_kl;
      point.layers = pair_names(a.pairs);
    }
    return point;
  };
  for (const Assignment& a : out.loop.exact.points) {
    plan.results.pareto_front.push_back(front_point(a, "exact"));
  }
  for (const Assignment& a : out.loop.nsga.front) {
    plan.results.pareto_front.push_back(front_point(a, "nsga2"));
  }
}

void record_provenance(const SearchInputs& in, const SearchOutcome& out, Plan& plan) {
  const SearchOptions& options = in.options;
  SearchProvenance& pv = plan.results.provenance;
  pv.algorithm =
      "exact front of the additive surrogate (multiple-choice knapsack DP) + NSGA-II (pagmo2) "
      "on the corrected surrogate, validated on the selection text";
  pv.sensitivity = options.metric == SensitivityMetric::kDkl ? "dkl" : "e_o";
  if (options.granularity == KvGranularity::kHead) pv.granularity = "per KV head";
  pv.memory_measure =
      in.budget.measure == MemoryMeasure::kBits ? "equivalent_bits" : "bytes_per_token";
  pv.budget = in.budget.description;
  if (in.budget.bounded()) pv.budget_value = in.budget.limit;
  pv.seed = options.nsga2.seed;
  pv.population = options.nsga2.population;
  pv.generations = options.nsga2.generations;
  pv.islands = options.nsga2.islands;
  pv.surrogate_evaluations = out.loop.search_evaluations;
  pv.real_evaluations = out.on_selection.size() + out.on_report.size();
  pv.selection_evaluations = out.on_selection.size();
  pv.report_evaluations = out.on_report.size();
  pv.validation_rounds = static_cast<uint64_t>(out.loop.rounds);
  pv.exact_front_points = out.loop.exact.points.size();
  pv.exact_front_states = out.loop.exact.states;
  pv.nsga2_front_points = out.loop.nsga.front.size();
  pv.unseeded_nsga2_coverage_of_exact_front = out.nsga_exact_coverage;
  pv.build = this_build();
#ifdef _OPENMP
  pv.threads = omp_get_max_threads();
#endif
  pv.clustering = out.cluster_note.empty() ? "off" : out.cluster_note;
  if (options.engine != EngineId::kKvplan) {
    pv.engine = engine_spec(options.engine).name;
    pv.engine_structure = out.structure;
  }
  pv.dbscan_eps = options.dbscan.eps;
  pv.dbscan_min_samples = options.dbscan.min_samples;
  for (const LayerGroup& g : out.space.groups) pv.groups.push_back({g.layers, side_name(g.side)});
  for (const MeasuredPlan& m : out.loop.measured) {
    pv.validations.push_back({m.round, m.name.empty() ? "searched" : m.name, m.assignment.memory,
                              m.assignment.predicted_error, m.measured});
  }
  for (const ValidationRound& r : out.loop.round_log) {
    pv.rounds.push_back(
        {r.round, r.measured, r.best_measured,
         std::isfinite(r.held_out_rank) ? std::optional(r.held_out_rank) : std::nullopt, r.next});
  }
  pv.surrogate_weights = out.loop.surrogate.weights;
  pv.surrogate_interaction = out.loop.surrogate.interaction;
  const Profile& profile = *in.profile;
  pv.profile = ProfileRecord{profile_hash(profile), profile.calibration.hash,
                             profile.calibration.tokens, profile.chunk_attends_quantized};
}

}  // namespace

Plan record_plan(const SearchInputs& in, const SearchOutcome& out, const RecordStamp& stamp) {
  const Profile& profile = *in.profile;
  Plan plan;
  plan.tool_version = stamp.tool_version;
  plan.created = stamp.created;
  plan.model = in.model;
  plan.quantization = profile.quantization;
  std::map<int, int> group_of_layer;
  for (size_t g = 0; g < out.space.groups.size(); ++g) {
    // A layer in a key group and a value group is listed under its key group.
    for (int l : out.space.groups[g].layers) group_of_layer.emplace(l, static_cast<int>(g));
  }
  // Per model layer, its entries' pairs (one entry, or one per KV head).
  std::map<int, std::vector<std::pair<size_t, KvPair>>> entries_of_layer;
  for (size_t i = 0; i < out.space.layers.size(); ++i) {
    entries_of_layer[out.space.layers[i].layer_of_model()].emplace_back(
        i, out.loop.chosen.assignment.pairs[i]);
  }
  for (const auto& [l, entries] : entries_of_layer) {
    std::vector<KvPair> heads;
    for (const auto& [i, pair] : entries) heads.push_back(pair);
    const int group = group_of_layer.at(out.space.layers[entries.front().first].layer);
    const bool differ =
        std::any_of(heads.begin(), heads.end(), [&](const KvPair& p) { return p != heads[0]; });
    if (!differ) {
      plan.layers.push_back({l, group, heads[0], profile.fp8_scales(l, heads[0])});
      continue;
    }
    const KvLayerGeometry& lg = in.model.geometry.layers.at(static_cast<size_t>(l));
    plan.layers.push_back(
        {l, group, widest_pair_of_heads(heads, lg, profile.quantization, l),
         profile.kv_absmax.empty()
             ? KvHeadScales{}
             : fp8_scales_for_heads(heads, profile.kv_absmax.at(static_cast<size_t>(l))),
         heads});
  }
  plan.results.quality = quality_of(in, out);
  record_baselines(in, out, plan);
  record_fronts(out, plan);
  record_provenance(in, out, plan);
  return plan;
}

}  // namespace kvplan::search
