// DBSCAN (Ester et al., KDD 1996) over small sets of points with Euclidean distance — used to
// cluster layers whose sensitivity vectors are alike (KVTuner §4.3 used eps 0.05, min_samples 2).
//
//   std::vector<int> label = dbscan(points, {.eps = 0.05, .min_samples = 2});  // -1 = noise
#pragma once

#include <vector>

namespace kvplan::search {

struct DbscanOptions {
  double eps = 0.05;    // neighbourhood radius (> 0)
  int min_samples = 2;  // points within eps (the point included) that make a core point (>= 1)
};

// Cluster labels 0..k-1 in order of first appearance, -1 for noise. Points must all have the same
// dimension. Throws Error(kInvalidArgument) for eps <= 0, min_samples < 1 or ragged points.
std::vector<int> dbscan(const std::vector<std::vector<double>>& points,
                        const DbscanOptions& options);

}  // namespace kvplan::search
