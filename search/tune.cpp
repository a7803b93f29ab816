#include "search/tune.h"

#include <map>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/hash.h"
#include "plan/memory_estimate.h"
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

// Memory of a uniform configuration in the search's measure; nullopt when it cannot pack a layer.
std::optional<std::pair<double, double>> uniform_memory(const KvGeometry& g, const KvPair& pair,
                                                        const QuantSettings& s) {
  double bits = 0, bytes = 0;
  try {
    for (int l = 0; l < g.n_layers(); ++l) {
      bytes += layer_bytes_per_token(g.layers[static_cast<size_t>(l)], pair, s, l).total();
      bits += pair.nominal_bits(g.layers[static_cast<size_t>(l)].head_dim);
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  return std::pair{bits / g.n_layers(), bytes};
}

std::vector<std::string> pair_names(const std::vector<KvPair>& pairs) {
  std::vector<std::string> names;
  for (const KvPair& p : pairs) names.push_back(p.name());
  return names;
}

}  // namespace

std::vector<LayerCandidates> candidates_from_profile(const Profile& profile,
                                                     SensitivityMetric metric) {
  if (!profile.complete()) {
    fail(ErrorCode::kInvalidArgument,
         "the profile holds {} of {} cells (a shard?): merge the shards with `kvplan profile "
         "merge` first",
         profile.n_present(), profile.n_cells());
  }
  std::vector<LayerCandidates> layers;
  for (int l = 0; l < profile.model.num_layers; ++l) {
    LayerCandidates lc{l, {}};
    for (size_t c = 0; c < profile.candidates.size(); ++c) {
      const ProfileCell& cell = *profile.cell(l, c);
      lc.candidates.push_back(
          {cell.pair, cell.nominal_bits, cell.key_bytes_per_token + cell.value_bytes_per_token,
           metric == SensitivityMetric::kDkl ? cell.metrics.dkl : cell.metrics.e_o});
    }
    layers.push_back(std::move(lc));
  }
  return layers;
}

std::string profile_hash(const Profile& profile) {
  json j = profile_to_json(profile);
  j.erase("timings");
  return hash_hex(hash64(j.dump()));
}

TuneOutput tune_plan(const Profile& profile, const HeldOutKl& held_out,
                     const std::string& held_out_source, uint64_t held_out_hash,
                     const TuneOptions& options) {
  TuneOutput out;
  SearchSpace space;
  for (const LayerCandidates& l : candidates_from_profile(profile, options.metric)) {
    space.layers.push_back({l.layer, pareto_front(l.candidates, options.measure)});
  }
  out.groups = group_layers(space.layers, options.dbscan);
  spdlog::info("{} layers in {} groups:\n{}", space.layers.size(), out.groups.size(),
               describe_groups(out.groups));
  space.groups = out.groups;
  space.measure = options.measure;
  space.budget = options.budget;

  // Every real evaluation goes through one cache: baselines and validations share measurements.
  std::map<std::vector<std::string>, HeldOutKl::Result> measured;
  const auto measure_full = [&](const std::vector<KvPair>& pairs) -> const HeldOutKl::Result& {
    const std::vector<std::string> key = pair_names(pairs);
    auto it = measured.find(key);
    if (it == measured.end()) it = measured.emplace(key, held_out.measure(pairs)).first;
    return it->second;
  };
  out.loop = run_validation_loop(
      space, options.search, [&](const std::vector<KvPair>& p) { return measure_full(p).mean_kl; },
      options.loop);

  // The final front under the refit surrogate, for the plan and the report.
  space.layer_weights = out.loop.weights;
  const SearchResult final_front = nsga2_front(space, options.search);

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
    for (int l : out.groups[g].layers) group_of_layer[l] = static_cast<int>(g);
  }
  const Assignment& chosen = out.loop.chosen.assignment;
  for (size_t i = 0; i < space.layers.size(); ++i) {
    const int l = space.layers[i].layer;
    plan.layers.push_back({l, group_of_layer.at(l), chosen.pairs[i]});
  }

  const HeldOutKl::Result& q = measure_full(chosen.pairs);
  const json data = {{"source", held_out_source},
                     {"hash", hash_hex(held_out_hash)},
                     {"tokens", held_out.n_tokens()},
                     {"scored", q.scored}};
  plan.quality = {{"metric", "mean KL(exact || quantized) of next-token distributions, nats"},
                  {"mean_kl", q.mean_kl},
                  {"top1_agreement", q.top1_agreement},
                  {"ppl", q.ppl},
                  {"ppl_exact_kv", q.ppl_exact},
                  {"predicted_error", chosen.predicted_error},
                  {"validated", true},
                  {"data", data}};

  const KvGeometry geometry = plan.model.geometry;
  plan.baselines = json::array();
  for (const std::string& name : options.baselines) {
    const KvPair pair = KvPair::parse(name);
    const auto memory = uniform_memory(geometry, pair, plan.quantization);
    if (!memory) continue;
    const double m = options.measure == MemoryMeasure::kBits ? memory->first : memory->second;
    const HeldOutKl::Result& r = measure_full(std::vector<KvPair>(space.layers.size(), pair));
    plan.baselines.push_back({{"kv", pair.name()},
                              {"equivalent_bits", memory->first},
                              {"bytes_per_token", memory->second},
                              {"within_budget", m <= options.budget * (1 + 1e-12)},
                              {"mean_kl", r.mean_kl},
                              {"top1_agreement", r.top1_agreement},
                              {"ppl", r.ppl}});
  }

  plan.pareto_front = json::array();
  for (const Assignment& a : final_front.front) {
    json point = {{"memory", a.memory}, {"predicted_error", a.predicted_error}};
    double bits = 0, bytes = 0;
    for (size_t i = 0; i < space.layers.size(); ++i) {
      for (const LayerCandidate& c : space.layers[i].candidates) {
        if (c.pair == a.pairs[i]) {
          bits += c.bits;
          bytes += c.bytes_per_token;
        }
      }
    }
    point["equivalent_bits"] = bits / static_cast<double>(space.layers.size());
    point["bytes_per_token"] = bytes;
    if (const auto it = measured.find(pair_names(a.pairs)); it != measured.end()) {
      point["mean_kl"] = it->second.mean_kl;
    }
    point["layers"] = pair_names(a.pairs);
    plan.pareto_front.push_back(point);
  }

  json groups = json::array();
  for (const LayerGroup& g : out.groups)
    groups.push_back({{"layers", g.layers}, {"choices", pair_names(g.choices)}});
  json validations = json::array();
  for (const MeasuredPlan& m : out.loop.measured) {
    validations.push_back({{"round", m.round},
                           {"memory", m.assignment.memory},
                           {"predicted_error", m.assignment.predicted_error},
                           {"mean_kl", m.measured}});
  }
  plan.provenance = {
      {"algorithm", "NSGA-II (pagmo2) over DBSCAN layer groups, validated on the real model"},
      {"sensitivity", options.metric == SensitivityMetric::kDkl ? "dkl" : "e_o"},
      {"memory_measure",
       options.measure == MemoryMeasure::kBits ? "equivalent_bits" : "bytes_per_token"},
      {"budget", options.budget_description},
      {"seed", options.search.seed},
      {"population", options.search.population},
      {"generations", options.search.generations},
      {"islands", options.search.islands},
      {"surrogate_evaluations", out.loop.search_evaluations + final_front.evaluations},
      {"real_evaluations", measured.size()},
      {"validation_rounds", out.loop.rounds},
      {"dbscan", {{"eps", options.dbscan.eps}, {"min_samples", options.dbscan.min_samples}}},
      {"groups", groups},
      {"validations", validations},
      {"surrogate_weights", out.loop.weights},
      {"profile",
       {{"hash", profile_hash(profile)},
        {"calibration_hash", profile.calibration.hash},
        {"calibration_tokens", profile.calibration.tokens}}}};
  return out;
}

}  // namespace kvplan::search
