#include "formats/format.h"

#include <set>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

TEST(Format, EveryNameParsesToItselfAndIdsAreUnique) {
  std::set<uint16_t> ids;
  for (const KvFormatTraits& info : format_table()) {
    const Format f = Format::parse(info.name);
    EXPECT_EQ(f.id(), info.id);
    EXPECT_EQ(f.name(), info.name);
    EXPECT_EQ(Format::from_id(static_cast<uint16_t>(info.id)), f);
    EXPECT_TRUE(ids.insert(static_cast<uint16_t>(info.id)).second) << info.name;
    EXPECT_GE(info.version, 1);
  }
  // f32 f16 bf16, int8/4/2 at the plan's group, g64 and g128, their KIVI key forms, q8_0 q4_0 q4_1
  // q5_0 q5_1 iq4_nl, fp8 x2, mxfp4 mxfp6_e2m3 mxfp8_e4m3 nvfp4, fp8_per_token_head, q8_0_had
  // q4_0_had iq4_nl_had, TurboQuant's tq_fp8 tq_mse3 tq_mse4 tq_int3 tq_int4, vLLM's
  // int4_per_token_head and int8_per_token_head; q4_1_had q5_0_had q5_1_had, the six *_had64, and
  // ik_llama.cpp's q6_0 with q6_0_had and q6_0_had64.
  EXPECT_EQ(ids.size(), 50u);
}

TEST(Format, StableNumericIds) {
  // These numbers are written into plans and stored objects: they must never change.
  EXPECT_EQ(static_cast<int>(Format::parse("f16").id()), 2);
  EXPECT_EQ(static_cast<int>(Format::parse("int4").id()), 17);
  EXPECT_EQ(static_cast<int>(Format::parse("int4_kivi").id()), 26);
  EXPECT_EQ(static_cast<int>(Format::parse("q4_0").id()), 33);
  EXPECT_EQ(static_cast<int>(Format::parse("fp8_e4m3").id()), 48);
  EXPECT_EQ(static_cast<int>(Format::parse("slot:134").id()), 64);
}

TEST(Format, Aliases) {
  EXPECT_EQ(Format::parse("fp16").name(), "f16");
  EXPECT_EQ(Format::parse("bfloat16").name(), "bf16");
  EXPECT_EQ(Format::parse("fp8").name(), "fp8_e4m3");
}

TEST(Format, Slot) {
  const Format s = Format::parse("slot:134");
  EXPECT_TRUE(s.is_slot());
  EXPECT_EQ(s.slot_bytes(), 134u);
  EXPECT_EQ(s.name(), "slot:134");
  EXPECT_NEAR(s.nominal_bits(128), 134.0 * 8 / 256, 1e-12);
  for (const char* bad : {"slot:", "slot:0", "slot:x", "slot:12b", "slot:-3"}) {
    EXPECT_THROW(Format::parse(bad), Error) << bad;
  }
}

TEST(Format, UnknownNameListsTheValidOnes) {
  try {
    (void)Format::parse("q3_k");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'q3_k'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("iq4_nl"), std::string::npos);
  }
  EXPECT_THROW(Format::from_id(999), Error);
}

}  // namespace
}  // namespace kvplan
