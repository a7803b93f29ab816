#include "model/tokenizer/byte_unicode.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

namespace kvplan {
namespace {

// Published facts of GPT-2's encoder.py mapping.
TEST(ByteUnicode, KnownCharacters) {
  EXPECT_EQ(byte_to_code_point(' '), U'\u0120');   // "Ġ"
  EXPECT_EQ(byte_to_code_point('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(byte_to_code_point('\t'), U'\u0109');  // "ĉ"
  EXPECT_EQ(byte_to_code_point(0x00), U'\u0100');
  EXPECT_EQ(byte_to_code_point(0x7F), U'\u0121');  // first byte after the space run
  EXPECT_EQ(byte_to_code_point(0xAD), U'\u0143');  // soft hyphen, the last remapped byte
  EXPECT_EQ(byte_to_code_point('A'), U'A');
  EXPECT_EQ(byte_to_code_point(0xE9), U'\u00E9');
  EXPECT_EQ(bytes_to_unicode_text(" world\n"), "\xC4\xA0world\xC4\x8A");
}

TEST(ByteUnicode, IsABijectionOntoPrintableCharacters) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_to_code_point(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second) << b;
    EXPECT_LT(cp, 0x100u + 68u);
    ASSERT_TRUE(code_point_to_byte(cp).has_value());
    EXPECT_EQ(*code_point_to_byte(cp), b);
  }
  EXPECT_FALSE(code_point_to_byte(U' ').has_value());
  EXPECT_FALSE(code_point_to_byte(U'\u4E2D').has_value());
}

TEST(ByteUnicode, RandomBytesRoundTrip) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 50; ++trial) {
    std::string bytes(static_cast<size_t>(rng() % 64), '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    EXPECT_EQ(unicode_text_to_bytes(bytes_to_unicode_text(bytes)), bytes);
  }
}

TEST(ByteUnicode, UnmappedCharactersPassThrough) {
  EXPECT_EQ(unicode_text_to_bytes("<|im_start|> x"), "<|im_start|> x");
  EXPECT_EQ(unicode_text_to_bytes("\xE4\xB8\xAD"), "\xE4\xB8\xAD");  // 中 is not a mapped char
}

}  // namespace
}  // namespace kvplan
