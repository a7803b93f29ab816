#include "search/dbscan.h"

#include <random>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan::search {
namespace {

TEST(Dbscan, FindsSeparatedBlobsAndNoise) {
  std::mt19937 rng(5);
  std::normal_distribution<double> n(0.0, 0.005);
  std::vector<std::vector<double>> pts;
  for (int i = 0; i < 6; ++i) pts.push_back({0.0 + n(rng), 0.0 + n(rng)});
  for (int i = 0; i < 5; ++i) pts.push_back({1.0 + n(rng), 0.5 + n(rng)});
  pts.push_back({5.0, 5.0});  // alone
  const auto label = dbscan(pts, {.eps = 0.05, .min_samples = 2});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(label[i], 0);
  for (int i = 6; i < 11; ++i) EXPECT_EQ(label[i], 1);
  EXPECT_EQ(label[11], -1);
}

TEST(Dbscan, ChainsThroughCorePointsAndKeepsBorderPoints) {
  // 0 -- 0.04 -- 0.08 -- 0.12: each within eps of the next, so one cluster by density-reachability.
  const std::vector<std::vector<double>> pts = {{0.0}, {0.04}, {0.08}, {0.12}, {0.30}};
  const auto label = dbscan(pts, {.eps = 0.05, .min_samples = 2});
  EXPECT_EQ(label, (std::vector<int>{0, 0, 0, 0, -1}));
  // min_samples 3: the end points are border points of the same cluster.
  const auto label3 = dbscan(pts, {.eps = 0.05, .min_samples = 3});
  EXPECT_EQ(label3, (std::vector<int>{0, 0, 0, 0, -1}));
}

TEST(Dbscan, RefusesBadParameters) {
  EXPECT_THROW(dbscan({{1.0}}, {.eps = 0.0, .min_samples = 2}), Error);
  EXPECT_THROW(dbscan({{1.0}}, {.eps = 0.1, .min_samples = 0}), Error);
  EXPECT_THROW(dbscan({{1.0}, {1.0, 2.0}}, {}), Error);
}

}  // namespace
}  // namespace kvplan::search
