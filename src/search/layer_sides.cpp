#include "search/layer_sides.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvplan::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

size_t index_of(std::vector<Format>& formats, const Format& f) {
  const auto it = std::find(formats.begin(), formats.end(), f);
  if (it != formats.end()) return static_cast<size_t>(it - formats.begin());
  formats.push_back(f);
  return formats.size() - 1;
}

// The sides of one quantity q[k][v] (every entry set): key k takes min_v q, value v takes
// min_k q - min q. nullopt when they do not add up to q.
bool split_quantity(const std::vector<std::vector<double>>& q, std::vector<double>& keys,
                    std::vector<double>& values) {
  const size_t nk = q.size(), nv = q.front().size();
  keys.assign(nk, kInf);
  values.assign(nv, kInf);
  double least = kInf;
  for (size_t k = 0; k < nk; ++k) {
    for (size_t v = 0; v < nv; ++v) {
      keys[k] = std::min(keys[k], q[k][v]);
      values[v] = std::min(values[v], q[k][v]);
      least = std::min(least, q[k][v]);
    }
  }
  for (double& v : values) v -= least;
  for (size_t k = 0; k < nk; ++k) {
    for (size_t v = 0; v < nv; ++v) {
      const double tolerance = 1e-9 * std::max({1.0, std::fabs(q[k][v]), std::fabs(least)});
      if (std::fabs(keys[k] + values[v] - q[k][v]) > tolerance) return false;
    }
  }
  return true;
}

}  // namespace

std::optional<std::vector<LayerSides>> split_sides(const std::vector<LayerCandidates>& layers) {
  std::vector<LayerSides> out;
  for (const LayerCandidates& layer : layers) {
    if (layer.candidates.empty()) return std::nullopt;
    std::vector<Format> keys, values;
    for (const LayerCandidate& c : layer.candidates) {
      index_of(keys, c.pair.key);
      index_of(values, c.pair.value);
    }
    if (keys.size() * values.size() != layer.candidates.size()) return std::nullopt;
    // [quantity][key][value]: bits, bytes, error.
    std::vector<std::vector<std::vector<double>>> q(
        3, std::vector<std::vector<double>>(keys.size(), std::vector<double>(values.size(), kInf)));
    for (const LayerCandidate& c : layer.candidates) {
      const size_t k = index_of(keys, c.pair.key), v = index_of(values, c.pair.value);
      if (!std::isinf(q[0][k][v])) return std::nullopt;  // the same pair twice
      q[0][k][v] = c.bits;
      q[1][k][v] = c.bytes_per_token;
      q[2][k][v] = c.error;
    }
    std::vector<double> key_share[3], value_share[3];
    for (size_t m = 0; m < 3; ++m) {
      if (!split_quantity(q[m], key_share[m], value_share[m])) return std::nullopt;
    }
    LayerSides sides;
    for (size_t k = 0; k < keys.size(); ++k)
      sides.keys.push_back({keys[k], key_share[0][k], key_share[1][k], key_share[2][k]});
    for (size_t v = 0; v < values.size(); ++v)
      sides.values.push_back({values[v], value_share[0][v], value_share[1][v], value_share[2][v]});
    out.push_back(std::move(sides));
  }
  return out;
}

}  // namespace kvplan::search
