#include "profile/profile_summary.h"

#include "core/error.h"

namespace kvplan {
namespace {

std::optional<size_t> candidate_index(const Profile& p, const KvPair& pair) {
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    if (p.candidates[i] == pair) return i;
  }
  return std::nullopt;
}

}  // namespace

double cell_metric(const CellMetrics& m, std::string_view metric) {
  if (metric == "e_k") return m.e_k;
  if (metric == "e_v") return m.e_v;
  if (metric == "e_a") return m.e_a;
  if (metric == "e_o") return m.e_o;
  if (metric == "dkl") return m.dkl;
  fail(ErrorCode::kInvalidArgument, "metric '{}': expected e_k, e_v, e_a, e_o or dkl", metric);
}

std::optional<double> key_value_sensitivity_ratio(const Profile& profile, std::string_view metric,
                                                  std::string_view high_format,
                                                  std::string_view low_format) {
  const Format hi = Format::parse(high_format), lo = Format::parse(low_format);
  auto k_low = candidate_index(profile, {lo, hi});
  auto v_low = candidate_index(profile, {hi, lo});
  if (!k_low || !v_low) {  // a side profile: the other side exact instead of `high_format`
    const Format exact(FormatId::kF32);
    k_low = candidate_index(profile, {lo, exact});
    v_low = candidate_index(profile, {exact, lo});
  }
  if (!k_low || !v_low) return std::nullopt;
  double num = 0, den = 0;
  for (int l = 0; l < profile.n_layers(); ++l) {
    const ProfileCell* a = profile.cell(l, *k_low);
    const ProfileCell* b = profile.cell(l, *v_low);
    if (a == nullptr || b == nullptr) return std::nullopt;
    num += cell_metric(a->metrics, metric);
    den += cell_metric(b->metrics, metric);
  }
  if (den <= 0) return std::nullopt;
  return num / den;
}

namespace {

// Appends the layers where metric(a) < metric(b) < metric(c) fails for one of `metrics`.
void check_order(const Profile& profile, size_t a, size_t b, size_t c,
                 std::initializer_list<const char*> metrics, const char* label, std::string& out) {
  for (int l = 0; l < profile.n_layers(); ++l) {
    const ProfileCell* x = profile.cell(l, a);
    const ProfileCell* y = profile.cell(l, b);
    const ProfileCell* z = profile.cell(l, c);
    if (x == nullptr || y == nullptr || z == nullptr) continue;
    for (const char* m : metrics) {
      const double u = cell_metric(x->metrics, m), v = cell_metric(y->metrics, m),
                   w = cell_metric(z->metrics, m);
      if (!(u < v && v < w)) {
        out += fmt::format("{}layer {} {}{} ({:.3g}, {:.3g}, {:.3g})", out.empty() ? "" : "; ", l,
                           label, m, u, v, w);
      }
    }
  }
}

}  // namespace

std::string monotonicity_violations(const Profile& profile) {
  std::string out;
  const auto i8 = candidate_index(profile, KvPair::parse("KV8"));
  const auto i4 = candidate_index(profile, KvPair::parse("KV4"));
  const auto i2 = candidate_index(profile, KvPair::parse("KV2"));
  if (i8 && i4 && i2) {
    check_order(profile, *i8, *i4, *i2, {"e_k", "e_v", "e_a", "e_o", "dkl"}, "", out);
    return out;
  }
  // A side profile: int8 < int4 < int2 for keys alone and for values alone.
  const Format exact(FormatId::kF32);
  const auto side = [&](const char* f, bool key) {
    const Format q = Format::parse(f);
    return candidate_index(profile, key ? KvPair{q, exact} : KvPair{exact, q});
  };
  if (const auto k8 = side("int8", true), k4 = side("int4", true), k2 = side("int2", true);
      k8 && k4 && k2) {
    check_order(profile, *k8, *k4, *k2, {"e_k", "e_a", "e_o", "dkl"}, "keys ", out);
  }
  if (const auto v8 = side("int8", false), v4 = side("int4", false), v2 = side("int2", false);
      v8 && v4 && v2) {
    check_order(profile, *v8, *v4, *v2, {"e_v", "e_o", "dkl"}, "values ", out);
  }
  return out;
}

ProfileSummary summarize_profile(const Profile& p) {
  ProfileSummary s;
  s.output_cells = p.n_present();
  s.total_cells = p.n_cells();
  s.complete = p.complete();
  for (const char* metric : {"dkl", "e_o"}) {
    for (const char* low : {"int4", "int2"}) {
      if (const auto r = key_value_sensitivity_ratio(p, metric, "int8", low)) {
        s.key_value_ratios.push_back({metric, low, *r});
      }
    }
  }
  if (s.complete) {
    ModelCheck a = additivity_check(p);
    if (a.cells > 0) s.additivity = std::move(a);
  }
  for (const auto& row : p.cells) {
    for (const auto& c : row) s.dkl_measured_cells += c && c->metrics.dkl_measured;
  }
  s.monotonicity_violations = monotonicity_violations(p);
  s.timings = p.timings;
  return s;
}

nlohmann::ordered_json profile_summary_to_json(const ProfileSummary& s) {
  nlohmann::ordered_json j;
  j["output_cells"] = s.output_cells;
  j["total_cells"] = s.total_cells;
  j["complete"] = s.complete;
  for (const KeyValueRatio& r : s.key_value_ratios) j["key_value_ratio"][r.name()] = r.ratio;
  if (s.additivity) {
    const ModelCheck& a = *s.additivity;
    j["additivity"] = {{"joint_cells", a.cells},
                       {"mean_abs_rel_error", a.mean_abs_rel_error},
                       {"max_abs_rel_error", a.max_abs_rel_error},
                       {"worst_layer", a.worst_layer},
                       {"worst_pair", a.worst_pair}};
  }
  j["dkl_measured_cells"] = s.dkl_measured_cells;
  j["monotonic_kv8_kv4_kv2"] = s.monotonicity_violations.empty();
  if (!s.monotonicity_violations.empty()) {
    j["monotonicity_violations"] = s.monotonicity_violations;
  }
  j["timings"] = timings_to_json(s.timings);
  return j;
}

}  // namespace kvplan
