#include "profile/pair_view.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/error.h"
#include "profile/side_candidates.h"

namespace kvplan {
namespace {

// What one entry is: a layer, or KV head `head` of it (`share` of its bytes).
struct Entry {
  int layer = 0;
  int head = -1;
  double share = 1;
};

double sensitivity(const ProfileCell& cell, SensitivityMetric metric, const Entry& entry) {
  if (metric == SensitivityMetric::kEo) return cell.metrics.e_o;
  if (entry.head < 0) return cell.metrics.dkl;
  if (!cell.metrics.dkl_heads.empty()) {
    return cell.metrics.dkl_heads[static_cast<size_t>(entry.head)];
  }
  const double o_mse = cell.metrics.o_mse;
  if (cell.metrics.o_mse_heads.empty()) return cell.metrics.dkl;  // one KV head: the whole layer
  // A pair that leaves its side exact (o_mse 0) has no error to share.
  if (!(o_mse > 0)) return cell.metrics.dkl * entry.share;
  return cell.metrics.dkl * cell.metrics.o_mse_heads[static_cast<size_t>(entry.head)] / o_mse;
}

std::vector<Entry> entries_of(const Profile& profile, SensitivityMetric metric,
                              KvGranularity granularity) {
  std::vector<Entry> out;
  for (int l = 0; l < profile.n_layers(); ++l) {
    const int n_kv = profile.model.geometry.layers[static_cast<size_t>(l)].n_kv_heads;
    if (granularity == KvGranularity::kLayer) {
      out.push_back({l, -1, 1});
      continue;
    }
    if (metric != SensitivityMetric::kDkl) {
      fail(ErrorCode::kInvalidArgument,
           "per-KV-head entries take dKL as their sensitivity (a head's share of o_mse "
           "apportions it); e_o has no per-head share");
    }
    for (size_t c = 0; c < profile.candidates.size() && n_kv > 1; ++c) {
      if (profile.cell(l, c)->metrics.o_mse_heads.empty()) {
        fail(ErrorCode::kInvalidArgument,
             "profile layer {} pair {}: no per-KV-head o_mse (o_mse_heads); the profile predates "
             "per-head plans: profile the model again",
             l, profile.candidates[c].name());
      }
    }
    for (int h = 0; h < n_kv; ++h) out.push_back({l, h, 1.0 / n_kv});
  }
  return out;
}

}  // namespace

std::vector<LayerCandidates> candidates_from_profile(const Profile& profile,
                                                     SensitivityMetric metric,
                                                     KvGranularity granularity) {
  if (!profile.complete()) {
    fail(ErrorCode::kInvalidArgument,
         "the profile holds {} of {} cells (a shard?): merge the shards with `kvplan profile "
         "merge` first",
         profile.n_present(), profile.n_cells());
  }
  bool sides = false;
  for (const KvPair& p : profile.candidates) sides |= candidate_side(p) != CandidateSide::kJoint;
  std::vector<LayerCandidates> layers;
  for (const Entry& entry : entries_of(profile, metric, granularity)) {
    const int l = entry.layer;
    const double share = entry.share;
    LayerCandidates lc{granularity == KvGranularity::kLayer ? l : static_cast<int>(layers.size()),
                       {},
                       l,
                       entry.head};
    if (!sides) {
      for (size_t c = 0; c < profile.candidates.size(); ++c) {
        const ProfileCell& cell = *profile.cell(l, c);
        lc.candidates.push_back({cell.pair, cell.nominal_bits,
                                 (cell.key_bytes_per_token + cell.value_bytes_per_token) * share,
                                 sensitivity(cell, metric, entry)});
      }
    } else {
      std::vector<const ProfileCell*> keys, values;
      for (size_t c = 0; c < profile.candidates.size(); ++c) {
        const ProfileCell* cell = profile.cell(l, c);
        const CandidateSide side = candidate_side(cell->pair);
        if (side == CandidateSide::kKeyOnly) keys.push_back(cell);
        if (side == CandidateSide::kValueOnly) values.push_back(cell);
      }
      if (keys.empty() || values.empty()) {
        fail(ErrorCode::kInvalidArgument,
             "profile layer {}: side candidates need both key-only (FMT/f32) and value-only "
             "(f32/FMT) cells",
             l);
      }
      for (const ProfileCell* k : keys) {
        for (const ProfileCell* v : values) {
          lc.candidates.push_back(
              {{k->pair.key, v->pair.value},
               (k->key_bits + v->value_bits) / 2,
               (k->key_bytes_per_token + v->value_bytes_per_token) * share,
               sensitivity(*k, metric, entry) + sensitivity(*v, metric, entry)});
        }
      }
    }
    layers.push_back(std::move(lc));
  }
  return layers;
}

std::vector<UniformConfig> uniform_configs(const std::vector<LayerCandidates>& layers) {
  std::vector<UniformConfig> out;
  if (layers.empty()) return out;
  for (const LayerCandidate& first : layers.front().candidates) {
    UniformConfig u{first.pair, 0, 0, 0, {}};
    bool everywhere = true;
    for (const LayerCandidates& layer : layers) {
      const auto it = std::find_if(layer.candidates.begin(), layer.candidates.end(),
                                   [&](const LayerCandidate& c) { return c.pair == first.pair; });
      if (it == layer.candidates.end()) {
        everywhere = false;
        break;
      }
      u.bytes_per_token += it->bytes_per_token;
      u.equivalent_bits += it->bits;
      u.predicted_error += it->error;
      u.layer_errors.push_back(it->error);
    }
    if (!everywhere) continue;
    u.equivalent_bits /= static_cast<double>(layers.size());
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(), [](const UniformConfig& a, const UniformConfig& b) {
    if (a.predicted_error != b.predicted_error) return a.predicted_error < b.predicted_error;
    if (a.bytes_per_token != b.bytes_per_token) return a.bytes_per_token < b.bytes_per_token;
    return a.pair.name() < b.pair.name();
  });
  return out;
}

double smallest_bytes_per_token(const std::vector<LayerCandidates>& layers) {
  double total = 0;
  for (const LayerCandidates& layer : layers) {
    double least = std::numeric_limits<double>::infinity();
    for (const LayerCandidate& c : layer.candidates) least = std::min(least, c.bytes_per_token);
    total += least;
  }
  return total;
}

}  // namespace kvplan
