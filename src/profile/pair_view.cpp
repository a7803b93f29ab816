#include "profile/pair_view.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/error.h"
#include "profile/side_candidates.h"

namespace kvplan {
namespace {

double sensitivity(const ProfileCell& cell, SensitivityMetric metric) {
  return metric == SensitivityMetric::kDkl ? cell.metrics.dkl : cell.metrics.e_o;
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
  bool sides = false;
  for (const KvPair& p : profile.candidates) sides |= candidate_side(p) != CandidateSide::kJoint;
  std::vector<LayerCandidates> layers;
  for (int l = 0; l < profile.n_layers(); ++l) {
    LayerCandidates lc{l, {}};
    if (!sides) {
      for (size_t c = 0; c < profile.candidates.size(); ++c) {
        const ProfileCell& cell = *profile.cell(l, c);
        lc.candidates.push_back({cell.pair, cell.nominal_bits,
                                 cell.key_bytes_per_token + cell.value_bytes_per_token,
                                 sensitivity(cell, metric)});
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
          lc.candidates.push_back({{k->pair.key, v->pair.value},
                                   (k->key_bits + v->value_bits) / 2,
                                   k->key_bytes_per_token + v->value_bytes_per_token,
                                   sensitivity(*k, metric) + sensitivity(*v, metric)});
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
