// The memory budget the search flags set: with --gpu-memory at a --context, a sliding-window layer
// counts the share of the context's tokens it holds (min(context, window) / context).
#include "cli/search_flags.h"

#include <gtest/gtest.h>

#include "formats/kv_pair.h"
#include "model/model_config.h"
#include "profile/side_candidates.h"

namespace kvplan::cli {
namespace {

TEST(SearchFlags, GpuMemoryBudgetWeighsSlidingLayersByTheTokensTheyHold) {
  SearchFlags f;
  f.gpu_memory = "1GiB";
  f.context = "4096";
  // Gemma 3's pattern: five sliding layers of 512 tokens, then a global one.
  const std::vector<int64_t> windows = {512, 512, 512, 512, 512, 0};
  const search::TuneOptions o = tune_options_from_flags(f, windows);
  EXPECT_DOUBLE_EQ(o.budget, double(1 << 30) / 4096);
  EXPECT_EQ(o.layer_token_share, (std::vector<double>{0.125, 0.125, 0.125, 0.125, 0.125, 1.0}));
  EXPECT_NE(o.budget_description.find("the 5 sliding-window layers"), std::string::npos)
      << o.budget_description;

  // A context inside the window: every layer holds every token.
  f.context = "512";
  EXPECT_TRUE(tune_options_from_flags(f, windows).layer_token_share.empty());
  // A budget in bytes per token is the steady state: windows do not enter it.
  SearchFlags bytes;
  bytes.max_bytes_per_token = 1000;
  EXPECT_TRUE(tune_options_from_flags(bytes, windows).layer_token_share.empty());
}

TEST(SearchFlags, SmallestPlanCountsTheSharesToo) {
  ModelConfig c;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = {2, 2};
  c.head_dim = 64;
  c.sliding_window = {512, 0};
  const std::vector<KvPair> candidates = {KvPair::parse("KV16"), KvPair::parse("KV8")};
  const double full = smallest_plan_bytes(c, QuantSettings{}, candidates);
  const double shared = smallest_plan_bytes(c, QuantSettings{}, candidates, {0.25, 1.0});
  // Each layer's smallest is KV8 (the same bytes per layer): the first counts a quarter.
  EXPECT_DOUBLE_EQ(shared, full / 2 * 0.25 + full / 2);
}

}  // namespace
}  // namespace kvplan::cli
