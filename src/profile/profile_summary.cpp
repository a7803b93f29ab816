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
  const auto k_low = candidate_index(profile, {lo, hi});
  const auto v_low = candidate_index(profile, {hi, lo});
  if (!k_low || !v_low) return std::nullopt;
  double num = 0, den = 0;
  for (int l = 0; l < profile.model.num_layers; ++l) {
    const ProfileCell* a = profile.cell(l, *k_low);
    const ProfileCell* b = profile.cell(l, *v_low);
    if (a == nullptr || b == nullptr) return std::nullopt;
    num += cell_metric(a->metrics, metric);
    den += cell_metric(b->metrics, metric);
  }
  if (den <= 0) return std::nullopt;
  return num / den;
}

std::string monotonicity_violations(const Profile& profile) {
  const auto i8 = candidate_index(profile, KvPair::parse("KV8"));
  const auto i4 = candidate_index(profile, KvPair::parse("KV4"));
  const auto i2 = candidate_index(profile, KvPair::parse("KV2"));
  if (!i8 || !i4 || !i2) return "";
  std::string out;
  for (int l = 0; l < profile.model.num_layers; ++l) {
    const ProfileCell* a = profile.cell(l, *i8);
    const ProfileCell* b = profile.cell(l, *i4);
    const ProfileCell* c = profile.cell(l, *i2);
    if (a == nullptr || b == nullptr || c == nullptr) continue;
    for (const char* m : {"e_k", "e_v", "e_a", "e_o", "dkl"}) {
      const double x = cell_metric(a->metrics, m), y = cell_metric(b->metrics, m),
                   z = cell_metric(c->metrics, m);
      if (!(x < y && y < z)) {
        out += fmt::format("{}layer {} {} ({:.3g}, {:.3g}, {:.3g})", out.empty() ? "" : "; ", l, m,
                           x, y, z);
      }
    }
  }
  return out;
}

}  // namespace kvplan
