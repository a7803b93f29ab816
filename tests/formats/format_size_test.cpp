#include "formats/format_size.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

size_t bytes(const char* format, size_t n, size_t group = 32) {
  return packed_row_bytes(Format::parse(format), n, group);
}

TEST(FormatSize, GgmlBlocksMatchLlamaCpp) {
  // ggml: q8_0 34 B, q4_0 18 B, q4_1 20 B, q5_0 22 B, q5_1 24 B, iq4_nl 18 B per 32 values.
  EXPECT_EQ(bytes("q8_0", 128), 4u * 34);
  EXPECT_EQ(bytes("q4_0", 128), 4u * 18);
  EXPECT_EQ(bytes("q4_1", 128), 4u * 20);
  EXPECT_EQ(bytes("q5_0", 128), 4u * 22);
  EXPECT_EQ(bytes("q5_1", 128), 4u * 24);
  EXPECT_EQ(bytes("iq4_nl", 128), 4u * 18);
  EXPECT_EQ(bytes("q8_0", 64), 68u);
}

TEST(FormatSize, PlainAndFp8) {
  EXPECT_EQ(bytes("f32", 128), 512u);
  EXPECT_EQ(bytes("f16", 128), 256u);
  EXPECT_EQ(bytes("bf16", 128), 256u);
  EXPECT_EQ(bytes("fp8_e4m3", 128), 128u);
  EXPECT_EQ(bytes("fp8_e5m2", 72), 72u);
}

TEST(FormatSize, UniformIntGroups) {
  // [f16 scale][f16 zero][codes], codes = ceil(n * bits / 8).
  EXPECT_EQ(bytes("int8", 128), 4u * (4 + 32));
  EXPECT_EQ(bytes("int4", 128), 4u * (4 + 16));
  EXPECT_EQ(bytes("int2", 128), 4u * (4 + 8));
  EXPECT_EQ(bytes("int4", 128, 128), 4u + 64);
  // head_dim 100, group 32: three full groups and a tail of 4 values.
  EXPECT_EQ(bytes("int4", 100), 3u * 20 + (4 + 2));
  EXPECT_EQ(bytes("int2", 3, 32), 4u + 1);
}

TEST(FormatSize, FixedGroupIntsIgnoreThePlanGroup) {
  // int4_g64 at head_dim 128: two groups of [4 B scale+zero][32 B codes], whatever group is asked.
  EXPECT_EQ(bytes("int4_g64", 128, 32), 2u * (4 + 32));
  EXPECT_EQ(bytes("int4_g64", 128, 128), 2u * (4 + 32));
  EXPECT_EQ(bytes("int8_g128", 128, 32), 4u + 128);
  EXPECT_EQ(bytes("int2_g128", 256, 16), 2u * (4 + 32));
  // head_dim 64: g128 is clamped to the row, one group of 64.
  EXPECT_EQ(bytes("int4_g128", 64, 32), 4u + 32);
  EXPECT_EQ(effective_group_size(Format::parse("int2_g64"), 100, 32), 64u);
  EXPECT_DOUBLE_EQ(effective_bits(Format::parse("int4_g128"), 128, 32), 4.25);
}

TEST(FormatSize, GroupLargerThanRowIsClampedForInts) {
  // stories260K: head_dim 8 < group 32 -> one group of 8.
  EXPECT_EQ(effective_group_size(Format::parse("int4"), 8, 32), 8u);
  EXPECT_EQ(bytes("int4", 8, 32), 4u + 4);
  EXPECT_EQ(bytes("int2", 8, 32), 4u + 2);
  EXPECT_EQ(bytes("int8", 8, 32), 4u + 8);
}

TEST(FormatSize, GgmlBlockOnAShortRowIsRefusedNamingTheFormat) {
  try {
    (void)bytes("q4_0", 8);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("q4_0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("8 values"), std::string::npos) << msg;
  }
  EXPECT_THROW((void)bytes("q8_0", 72), Error);
}

TEST(FormatSize, RefusesEmptyRowsZeroGroupsAndSlots) {
  EXPECT_THROW((void)bytes("int4", 0), Error);
  EXPECT_THROW((void)bytes("int4", 64, 0), Error);
  EXPECT_THROW((void)bytes("slot:134", 128), Error);
}

TEST(FormatSize, EffectiveBitsIncludeOverhead) {
  EXPECT_DOUBLE_EQ(effective_bits(Format::parse("q4_0"), 128, 32), 4.5);
  EXPECT_DOUBLE_EQ(effective_bits(Format::parse("int4"), 128, 32), 5.0);
  EXPECT_DOUBLE_EQ(effective_bits(Format::parse("int2"), 128, 128), 2.25);
}

TEST(FormatSize, RowCostAsTheFormatsTableListsIt) {
  const RowCost q4 = row_cost(Format::parse("q4_0"), 128, 32);  // 4 blocks of 16 codes + f16
  EXPECT_DOUBLE_EQ(q4.bytes, 72.0);
  EXPECT_DOUBLE_EQ(q4.effective_bits, 4.5);
  EXPECT_DOUBLE_EQ(q4.overhead_bits, 0.5);
  // KIVI keys: 128 channels x (32 tokens x 4 bits + f16 scale and zero) per 32 tokens.
  const RowCost kivi = row_cost(Format::parse("int4_kivi"), 128, 32);
  EXPECT_DOUBLE_EQ(kivi.bytes, 128.0 * (16 + 4) / 32);
  EXPECT_DOUBLE_EQ(kivi.effective_bits, 5.0);
  EXPECT_DOUBLE_EQ(kivi.overhead_bits, 1.0);
  EXPECT_THROW((void)row_cost(Format::parse("q8_0"), 8, 32), Error);
}

}  // namespace
}  // namespace kvplan
