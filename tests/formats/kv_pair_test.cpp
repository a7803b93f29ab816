#include "formats/kv_pair.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

TEST(KvPair, KvTunerNames) {
  EXPECT_EQ(KvPair::parse("KV8"), (KvPair{Format(FormatId::kInt8), Format(FormatId::kInt8)}));
  EXPECT_EQ(KvPair::parse("K8V4"), (KvPair{Format(FormatId::kInt8), Format(FormatId::kInt4)}));
  EXPECT_EQ(KvPair::parse("K4V2"), (KvPair{Format(FormatId::kInt4), Format(FormatId::kInt2)}));
  EXPECT_EQ(KvPair::parse("K2V4"), (KvPair{Format(FormatId::kInt2), Format(FormatId::kInt4)}));
  EXPECT_EQ(KvPair::parse("KV16"), KvPair::uniform(Format(FormatId::kBF16)));
  for (const char* name :
       {"KV8", "KV4", "KV2", "K8V4", "K8V2", "K4V8", "K4V2", "K2V8", "KV16", "K16V4"}) {
    EXPECT_EQ(KvPair::parse(name).name(), name);
  }
}

TEST(KvPair, ExplicitPairsAndSlots) {
  const KvPair p = KvPair::parse("q8_0/q4_0");
  EXPECT_EQ(p.key.name(), "q8_0");
  EXPECT_EQ(p.value.name(), "q4_0");
  EXPECT_EQ(p.name(), "q8_0/q4_0");
  EXPECT_EQ(KvPair::parse("int8/int4").name(), "K8V4");
  const KvPair s = KvPair::parse("slot:134");
  EXPECT_TRUE(s.is_slot());
  EXPECT_EQ(s.name(), "slot:134");
}

TEST(KvPair, EquivalentBits) {
  EXPECT_DOUBLE_EQ(KvPair::parse("K8V4").nominal_bits(128), 6.0);
  EXPECT_DOUBLE_EQ(KvPair::parse("K4V2").nominal_bits(128), 3.0);
  EXPECT_DOUBLE_EQ(KvPair::parse("q5_0/q4_0").nominal_bits(128), 4.5);
}

TEST(KvPair, BadNamesAreRefused) {
  for (const char* bad : {"KV", "KV3", "K3V2", "K8", "K8V", "V4", "foo", "q8_0/", "/q4_0",
                          "q8_0/slot:4", "q8_0/q3_k", ""}) {
    EXPECT_THROW(KvPair::parse(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace kvplan
