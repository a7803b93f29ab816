// vLLM's int8_per_token_head rows: byte identity with vLLM's own per-token-head store
// (data/int8_per_token_head_golden.json, written by scripts/fixtures/vllm-reference.sh: vLLM
// 0.34.0's _reshape_cache_per_token_head with int8 caches, run by Triton's interpreter), and rows
// worked by hand, including the rounding vLLM's add-a-half-then-truncate store gives.
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/format_size.h"
#include "formats/pack.h"
#include "hex.h"

namespace kvplan {
namespace {

using test::to_hex;

std::vector<uint8_t> packed(const std::vector<float>& row) {
  const Format f(FormatId::kInt8PerTokenHead);
  std::vector<uint8_t> out(packed_row_bytes(f, row.size(), 32));
  pack_row(f, row, out, {});
  return out;
}

TEST(Int8PerTokenHead, RowsAreByteIdenticalToVllms) {
  std::ifstream in(std::string(KVPLAN_SOURCE_DIR) +
                   "/tests/formats/data/int8_per_token_head_golden.json");
  ASSERT_TRUE(in) << "missing tests/formats/data/int8_per_token_head_golden.json";
  const nlohmann::json golden = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& c : golden["cases"]) {
    const std::string what =
        fmt::format("head_dim {}, {}", c["head_dim"].get<int>(), c["rows"].get<std::string>());
    for (const char* side : {"key", "value"}) {
      const std::vector<float> row =
          test::floats_from_bits(c[fmt::format("{}_f32_bits", side)].get<std::vector<uint32_t>>());
      EXPECT_EQ(to_hex(packed(row)), c[fmt::format("{}_row", side)].get<std::string>())
          << what << ", " << side;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7 * 6 * 2);  // head_dim 8 ... 512, six rows, keys and values
}

// amax 127 gives s = 1 exactly, so the codes are x + 0.5 away from zero, truncated: 127.5 clamps
// to 127, -127.5 truncates to -127 (0x81), +-2.5 go to +-3, and 0.49999997 + 0.5 rounds to 1.0 in
// f32 before the truncation, so it becomes 1 (an exact round-half-away would give 0), as in vLLM.
TEST(Int8PerTokenHead, RowsByHand) {
  const float below_half = 0.49999997f;
  EXPECT_EQ(to_hex(packed({127, -127, 2.5f, -2.5f, below_half, -below_half, 0.25f, 0})),
            "7f8103fd01ff0000"
            "0000803f");  // s = 1.0f
  // A zero row takes the floor s = 1e-6 (0x358637bd) and codes 0.
  EXPECT_EQ(to_hex(packed(std::vector<float>(8, 0.0f))), "0000000000000000bd378635");
  // Dequantized: code * s.
  std::vector<float> y(4);
  unpack_row(Format(FormatId::kInt8PerTokenHead), packed({254, -127, 1, 0}), y, {});
  EXPECT_EQ(y, (std::vector<float>{254, -128, 2, 0}));  // s = 2: -63.5 -> -64, 0.5 -> 1
}

TEST(Int8PerTokenHead, RowIsHeadDimCodesAndAnF32Scale) {
  const Format f(FormatId::kInt8PerTokenHead);
  EXPECT_EQ(packed_row_bytes(f, 64, 32), 68u);
  EXPECT_EQ(packed_row_bytes(f, 128, 32), 132u);
  EXPECT_EQ(packed_row_bytes(f, 100, 32), 104u);  // no block: any head_dim
}

}  // namespace
}  // namespace kvplan
