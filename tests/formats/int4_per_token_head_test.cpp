// vLLM's int4_per_token_head rows: byte identity with vLLM's own reshape_and_cache_int4
// (data/int4_per_token_head_golden.json, written by scripts/fixtures/vllm-reference.sh: vLLM
// 0.34.0's CPU rotation and its Triton write kernel run by Triton's interpreter), and a row worked
// by hand.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/format_size.h"
#include "formats/kv_format_math.h"
#include "formats/pack.h"
#include "hex.h"

namespace kvplan {
namespace {

using test::to_hex;

std::vector<float> floats_of(const nlohmann::json& bits) {
  return test::floats_from_bits(bits.get<std::vector<uint32_t>>());
}

std::vector<uint8_t> packed(const std::vector<float>& row) {
  const Format f(FormatId::kInt4PerTokenHead);
  std::vector<uint8_t> out(packed_row_bytes(f, row.size(), 32));
  pack_row(f, row, out, {});
  return out;
}

TEST(Int4PerTokenHead, RowsAreByteIdenticalToVllms) {
  std::ifstream in(std::string(KVPLAN_SOURCE_DIR) +
                   "/tests/formats/data/int4_per_token_head_golden.json");
  ASSERT_TRUE(in) << "missing tests/formats/data/int4_per_token_head_golden.json";
  const nlohmann::json golden = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& c : golden["cases"]) {
    const std::string what =
        fmt::format("head_dim {}, {}", c["head_dim"].get<int>(), c["rows"].get<std::string>());
    EXPECT_EQ(to_hex(packed(floats_of(c["key_f32_bits"]))), c["key_row"].get<std::string>())
        << what << ", key";
    EXPECT_EQ(to_hex(packed(floats_of(c["value_f32_bits"]))), c["value_row"].get<std::string>())
        << what << ", value";
    checked += 2;
  }
  EXPECT_EQ(checked, 7 * 6 * 2);  // head_dim 8 ... 512, six rows, keys and values
}

// Worked by hand at head_dim 8: x = s (vLLM's signs) times e_0 * 8 rotates to r = H (s x) =
// 8 H e_0 = 8 (1, ..., 1): max = min = 8, scale = max(0, 1e-6) = 1e-6, zero point
// round(-8 / 1e-6) clamped = 0, codes round(8 / 1e-6) clamped = 15. Dequantized: r = 15e-6 each,
// inverse H r / 8 = (15e-6, 0, ..., 0), times the signs.
TEST(Int4PerTokenHead, ARowByHand) {
  std::vector<float> x(8, 0.0f);
  x[0] = 8.0f * vllm_rht_sign(8, 0);
  const std::vector<uint8_t> r = packed(x);
  ASSERT_EQ(r.size(), 4u + 4u);
  EXPECT_EQ(to_hex({r.begin(), r.begin() + 4}), "ffffffff");
  uint32_t bits = 0;
  std::memcpy(&bits, r.data() + 4, 4);
  float scale = 1e-6f;
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, 4);
  EXPECT_EQ(bits, scale_bits & ~15u);  // zero point 0 in the low mantissa bits
  std::vector<float> y(8);
  unpack_row(Format(FormatId::kInt4PerTokenHead), r, y, {});
  float stored;
  std::memcpy(&stored, &bits, 4);
  EXPECT_FLOAT_EQ(y[0], 15 * stored * vllm_rht_sign(8, 0));
  for (int i = 1; i < 8; ++i) EXPECT_EQ(y[i], 0.0f) << i;
}

}  // namespace
}  // namespace kvplan
