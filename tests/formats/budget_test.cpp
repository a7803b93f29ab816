// A budget resolved on a model's KV geometry, and the one tolerance of every comparison with it.
#include "formats/budget.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

KvGeometry with_windows(const std::vector<int64_t>& windows) {
  KvGeometry g;
  for (const int64_t w : windows) g.layers.push_back({1, 256, w});
  return g;
}

TEST(Budget, GpuMemoryWeighsSlidingLayersByTheTokensTheyHold) {
  // Gemma 3's pattern: five sliding layers of 512 tokens, then a global one.
  const KvGeometry g = with_windows({512, 512, 512, 512, 512, 0});
  const Budget b =
      resolve_budget(BudgetRequest::gpu_memory(1ull << 30, 0, 4096, 1, "1GiB", "", "4096"), g);
  EXPECT_EQ(b.measure, MemoryMeasure::kBytes);
  EXPECT_DOUBLE_EQ(b.limit, double(1 << 30) / 4096);
  EXPECT_EQ(b.layer_token_share, (std::vector<double>{0.125, 0.125, 0.125, 0.125, 0.125, 1.0}));
  EXPECT_NE(b.description.find("the 5 sliding-window layers"), std::string::npos) << b.description;

  // A context inside the window: every layer holds every token.
  EXPECT_TRUE(resolve_budget(BudgetRequest::gpu_memory(1ull << 30, 0, 512, 1, "1GiB", "", "512"), g)
                  .layer_token_share.empty());
  // A budget in bytes per token is the steady state: windows do not enter it.
  EXPECT_TRUE(resolve_budget(BudgetRequest::bytes_per_token(1000), g).layer_token_share.empty());
}

TEST(Budget, EffectiveBitsBecomeBytesPerTokenOnTheGeometry) {
  // SmolLM2-135M: 30 layers x 3 KV heads x 64 x (K + V) values; 4.5 bits = q4_0's 6,480 bytes.
  const Budget b =
      resolve_budget(BudgetRequest::effective_bits(4.5), KvGeometry::uniform("m", 30, 3, 64));
  EXPECT_DOUBLE_EQ(b.limit, 6480);
  EXPECT_EQ(b.description, "4.5 effective bits per value = 6480.0 bytes per token");
  const Budget nominal = resolve_budget(BudgetRequest::nominal_bits(4), {});
  EXPECT_EQ(nominal.measure, MemoryMeasure::kBits);
  EXPECT_FALSE(resolve_budget(BudgetRequest::none(), {}).bounded());
}

TEST(Budget, ToleranceAdmitsRoundingAndNothingMore) {
  const Budget b = resolve_budget(BudgetRequest::bytes_per_token(6480), {});
  EXPECT_TRUE(b.fits(6480));
  EXPECT_TRUE(b.fits(6480 * (1 + 1e-14)));  // the same bytes summed in another order
  EXPECT_FALSE(b.fits(6480 * (1 + 1e-9)));
  EXPECT_FALSE(b.fits(6481));
  EXPECT_TRUE(within_budget(1.0, budget_ceiling(1.0) / (1 + kBudgetTolerance)));
}

TEST(Budget, BelowTheSmallestPlanIsRefusedNamingBoth) {
  const Budget b = resolve_budget(BudgetRequest::bytes_per_token(100), {});
  b.require_at_least(100, "");
  try {
    b.require_at_least(120, "layers 0 and 1 stay 16-bit");
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()),
              "budget 100 bytes per token: the smallest possible plan takes 120 bytes per token "
              "(every layer in its smallest candidate; layers 0 and 1 stay 16-bit)");
  }
}

TEST(Budget, GpuMemoryRequestRefusesWhatCannotHoldACache) {
  EXPECT_THROW(BudgetRequest::gpu_memory(1 << 20, 1 << 20, 4096, 1, "1MiB", "1MiB", "4096"), Error);
  EXPECT_THROW(BudgetRequest::gpu_memory(1 << 20, 0, 4096, 0, "1MiB", "", "4096"), Error);
}

}  // namespace
}  // namespace kvplan
