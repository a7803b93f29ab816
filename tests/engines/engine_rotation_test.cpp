// Which formats an engine that rotates K/V stores, per head_dim and rotation setting. The facts
// (docs/engines.md sections 5 and 6):
// - llama.cpp PR #21038: quantized K and V rotated when head_dim % 64 == 0, K in blocks of the
//   largest power of two dividing head_dim, V in blocks of 64; f16/bf16 never; the environment
//   variable LLAMA_ATTN_ROT_DISABLE turns both off;
// - ik_llama.cpp: -khad / -vhad rotate every layer's K / V in blocks of hadamard_size(head size):
//   the head size when it is a power of two, else the largest of 512 ... 64 dividing it
//   (src/llama-model.h).
// kvplan packs the whole-row rotation (*_had) and the rotation in spans of 64 (*_had64).
#include <string>

#include <gtest/gtest.h>

#include "engines/engine.h"

namespace kvplan {
namespace {

const EngineSpec& llama() {
  return engine_spec(EngineId::kLlamaCpp);
}
const EngineSpec& ik() {
  return engine_spec(EngineId::kIkLlamaCpp);
}
KvPair pair(const char* name) {
  return KvPair::parse(name);
}

TEST(EngineRotation, RotatedFormatsAreTheTwinsOfTheCacheTypes) {
  // Every quantized llama.cpp cache type has both twins.
  for (const char* plain : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}) {
    const Format f = Format::parse(plain);
    EXPECT_EQ(rotated_twin(f, 0), Format::parse(std::string(plain) + "_had")) << plain;
    EXPECT_EQ(rotated_twin(f, 64), Format::parse(std::string(plain) + "_had64")) << plain;
    EXPECT_EQ(engine_cache_type(*rotated_twin(f, 0)), f) << plain;
    EXPECT_EQ(engine_cache_type(*rotated_twin(f, 64)), f) << plain;
  }
  EXPECT_FALSE(rotated_twin(Format::parse("f16"), 0).has_value());
  EXPECT_FALSE(rotated_twin(Format::parse("q8_0"), 128).has_value());
  EXPECT_EQ(engine_cache_type(Format::parse("q5_1")), Format::parse("q5_1"));
  // At some head_dim the llamas store them; engines that do not rotate never do.
  for (const char* f :
       {"q8_0_had", "q4_0_had", "iq4_nl_had", "q5_1_had", "q4_1_had64", "iq4_nl_had64"}) {
    EXPECT_TRUE(engine_stores(llama(), Format::parse(f))) << f;
    EXPECT_TRUE(engine_stores(ik(), Format::parse(f))) << f;
    EXPECT_FALSE(engine_stores(engine_spec(EngineId::kVllm), Format::parse(f))) << f;
  }
}

TEST(EngineRotation, LlamaCppStoresRotatedPairsByDefaultAtHeadDim64) {
  const auto settings = rotation_settings(llama(), 64);
  ASSERT_EQ(settings.size(), 2u);
  EXPECT_TRUE(settings[0].keys && settings[0].values && !settings[0].disabled_by_environment);
  EXPECT_TRUE(!settings[1].keys && !settings[1].values && settings[1].disabled_by_environment);
  // By default: the rotated pair, 16-bit sides beside it.
  EXPECT_EQ(setting_for(llama(), pair("iq4_nl_had/iq4_nl_had"), 64), settings[0]);
  EXPECT_EQ(setting_for(llama(), pair("f16/q4_0_had"), 64), settings[0]);
  // An unrotated quantized pair needs the environment variable.
  EXPECT_EQ(setting_for(llama(), pair("q8_0/q4_1"), 64), settings[1]);
  EXPECT_EQ(setting_for(llama(), pair("f16/f16"), 64), settings[0]);
  // Rotated and unrotated quantized sides together: no llama.cpp run stores that.
  EXPECT_FALSE(engine_stores(llama(), pair("q8_0_had/q4_0"), 64));
  EXPECT_FALSE(engine_stores(llama(), pair("q8_0/q4_0_had"), 64));
}

TEST(EngineRotation, LlamaCppRotatesValuesInBlocksOf64) {
  // head_dim 64: one span is the row, so the whole-row names are the ones offered.
  EXPECT_TRUE(engine_stores(llama(), pair("q5_0_had/q4_1_had"), 64));
  EXPECT_FALSE(engine_stores(llama(), pair("q8_0_had/q8_0_had64"), 64));
  EXPECT_EQ(engine_rotation_span(llama(), 64, false), 0);
  // head_dim 128 and 256: K's block is the row, V's is 64.
  for (const int d : {128, 256}) {
    EXPECT_EQ(engine_rotation_span(llama(), d, true), 0) << d;
    EXPECT_EQ(engine_rotation_span(llama(), d, false), 64) << d;
    EXPECT_TRUE(engine_stores(llama(), pair("q8_0_had/q4_0_had64"), d)) << d;
    EXPECT_TRUE(engine_stores(llama(), pair("q8_0_had/f16"), d)) << d;
    EXPECT_FALSE(engine_stores(llama(), pair("q8_0_had/q8_0_had"), d)) << d;
    EXPECT_FALSE(engine_stores(llama(), pair("q8_0_had64/q8_0_had64"), d)) << d;
    EXPECT_FALSE(engine_stores(llama(), pair("f16/q4_0_had"), d)) << d;
    EXPECT_EQ(setting_for(llama(), pair("q8_0/q8_0"), d)->disabled_by_environment, true) << d;
  }
  // head_dim 192: K's block is 64 too (the largest power of two dividing it); at 384 it is 128,
  // which no kvplan format rotates: K is then offered unrotated only.
  EXPECT_TRUE(engine_stores(llama(), pair("q8_0_had64/iq4_nl_had64"), 192));
  EXPECT_FALSE(engine_stores(llama(), pair("q8_0_had/f16"), 192));
  EXPECT_FALSE(engine_rotation_span(llama(), 384, true).has_value());
  EXPECT_EQ(engine_rotation_span(llama(), 384, false), 64);
  EXPECT_FALSE(engine_stores(llama(), pair("q8_0_had64/f16"), 384));
  EXPECT_TRUE(engine_stores(llama(), pair("f16/q8_0_had64"), 384));
  // head_dim 32 or 96: nothing rotated, no environment needed.
  for (const int d : {32, 96}) {
    ASSERT_EQ(rotation_settings(llama(), d).size(), 1u) << d;
    EXPECT_EQ(setting_for(llama(), pair("q8_0/q4_0"), d), RotationSetting{}) << d;
    EXPECT_FALSE(engine_stores(llama(), pair("q8_0_had/q8_0_had"), d)) << d;
  }
  // Layers of different head_dim (0): only the environment variable makes the storage known.
  EXPECT_TRUE(setting_for(llama(), pair("q8_0/q4_0"), 0)->disabled_by_environment);
  EXPECT_FALSE(engine_stores(llama(), pair("q8_0_had/q8_0_had"), 0));
}

TEST(EngineRotation, IkLlamaCppRotatesEachSideOnItsOwnSwitch) {
  const auto settings = rotation_settings(ik(), 64);
  ASSERT_EQ(settings.size(), 4u);
  EXPECT_EQ(settings[0], RotationSetting{});  // no flag first
  EXPECT_EQ(rotation_words(ik(), *setting_for(ik(), pair("q8_0_had/q4_0"), 64)), "-khad");
  EXPECT_EQ(rotation_words(ik(), *setting_for(ik(), pair("q8_0/iq4_nl_had"), 64)), "-vhad");
  EXPECT_EQ(rotation_words(ik(), *setting_for(ik(), pair("q4_0_had/q4_0_had"), 64)), "-khad -vhad");
  EXPECT_EQ(rotation_words(ik(), *setting_for(ik(), pair("q5_0/q4_0"), 64)), "no -khad/-vhad");
  // A rotated side holds no unrotated quantized type and the reverse; 16-bit under either.
  EXPECT_FALSE(setting_stores(ik(), settings[1], 64, true, Format::parse("q8_0")));
  EXPECT_TRUE(setting_stores(ik(), settings[1], 64, true, Format::parse("f16")));
  EXPECT_FALSE(setting_stores(ik(), settings[0], 64, true, Format::parse("q8_0_had")));
  // Under -khad q5_0 keys are q5_0_had; the spans of 64 are the whole row's names at 64.
  EXPECT_FALSE(setting_stores(ik(), settings[1], 64, true, Format::parse("q5_0")));
  EXPECT_TRUE(setting_stores(ik(), settings[1], 64, true, Format::parse("q5_0_had")));
  EXPECT_FALSE(setting_stores(ik(), settings[1], 64, true, Format::parse("q5_0_had64")));
  // q6_0 is ik_llama.cpp's alone: rotated under -vhad, plain without it; llama.cpp has neither.
  EXPECT_TRUE(setting_stores(ik(), settings[2], 64, false, Format::parse("q6_0_had")));
  EXPECT_TRUE(setting_stores(ik(), settings[0], 64, false, Format::parse("q6_0")));
  EXPECT_TRUE(engine_stores(ik(), pair("q6_0_had64/q6_0"), 192));
  EXPECT_FALSE(engine_stores(llama(), pair("q6_0/q6_0"), 64));
  EXPECT_FALSE(engine_stores(llama(), pair("q6_0_had/q6_0_had64"), 64));
  // Any power-of-two head size is rotated whole (128, 256); 192 and 320 in blocks of 64; 384 in
  // blocks of 128, which no kvplan format rotates (only the setting without flags).
  EXPECT_EQ(rotation_settings(ik(), 256).size(), 4u);
  EXPECT_EQ(rotation_settings(ik(), 192).size(), 4u);
  EXPECT_TRUE(engine_stores(ik(), pair("q8_0_had64/q8_0"), 192));
  EXPECT_FALSE(engine_stores(ik(), pair("q8_0_had/q8_0"), 192));
  EXPECT_EQ(engine_rotation_span(ik(), 320, true), 64);
  EXPECT_EQ(rotation_settings(ik(), 384).size(), 1u);
  EXPECT_EQ(rotation_settings(ik(), 96).size(), 1u);
}

TEST(EngineRotation, EnginesThatDoNotRotateHaveOneSetting) {
  for (const EngineSpec& e : all_engines()) {
    if (e.rotation != EngineRotation::kNone) continue;
    EXPECT_EQ(rotation_settings(e, 64).size(), 1u) << e.name;
    EXPECT_EQ(rotation_words(e, {}), "") << e.name;
  }
  EXPECT_TRUE(engine_stores(engine_spec(EngineId::kKvplan), pair("q8_0_had/q4_0"), 64));
}

}  // namespace
}  // namespace kvplan
