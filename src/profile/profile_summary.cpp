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

}  // namespace kvplan
