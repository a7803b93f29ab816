#include "search/dbscan.h"

#include <cmath>

#include "core/error.h"

namespace kvplan::search {
namespace {

double distance(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s);
}

}  // namespace

std::vector<int> dbscan(const std::vector<std::vector<double>>& points,
                        const DbscanOptions& options) {
  if (!(options.eps > 0))
    fail(ErrorCode::kInvalidArgument, "DBSCAN eps must be > 0, got {}", options.eps);
  if (options.min_samples < 1) {
    fail(ErrorCode::kInvalidArgument, "DBSCAN min_samples must be >= 1, got {}",
         options.min_samples);
  }
  const size_t n = points.size();
  for (const auto& p : points) {
    if (p.size() != points.front().size()) {
      fail(ErrorCode::kInvalidArgument, "DBSCAN points have different dimensions ({} and {})",
           points.front().size(), p.size());
    }
  }
  // Layers number in the hundreds at most: the O(n^2) neighbourhood table is the simple choice.
  std::vector<std::vector<size_t>> neighbours(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (distance(points[i], points[j]) <= options.eps) neighbours[i].push_back(j);
    }
  }
  const auto is_core = [&](size_t i) {
    return neighbours[i].size() >= static_cast<size_t>(options.min_samples);
  };
  constexpr int kUnvisited = -2, kNoise = -1;
  std::vector<int> label(n, kUnvisited);
  int next_cluster = 0;
  for (size_t i = 0; i < n; ++i) {
    if (label[i] != kUnvisited) continue;
    if (!is_core(i)) {
      label[i] = kNoise;
      continue;
    }
    const int cluster = next_cluster++;
    label[i] = cluster;
    std::vector<size_t> frontier = neighbours[i];
    for (size_t k = 0; k < frontier.size(); ++k) {
      const size_t j = frontier[k];
      if (label[j] == kNoise) label[j] = cluster;  // a border point
      if (label[j] != kUnvisited) continue;
      label[j] = cluster;
      if (is_core(j)) frontier.insert(frontier.end(), neighbours[j].begin(), neighbours[j].end());
    }
  }
  return label;
}

}  // namespace kvplan::search
