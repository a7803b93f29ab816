#include "model/tokenizer/pretokenizer_regex.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"

namespace kvplan {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view name, std::string_view text) {
  const auto patterns = pretokenizer_patterns(name);
  EXPECT_TRUE(patterns.has_value()) << name;
  const PreTokenizer pre(*patterns);
  Pieces out;
  for (std::string_view p : pre.split(text)) out.emplace_back(p);
  return out;
}

// Splits worked out by hand from the published patterns.
TEST(PreTokenizerRegex, Gpt2) {
  EXPECT_EQ(split("gpt2", "Hello world!"), (Pieces{"Hello", " world", "!"}));
  EXPECT_EQ(split("gpt2", "I'm   here"), (Pieces{"I", "'m", "  ", " here"}));
  EXPECT_EQ(split("gpt2", "x=12345;"), (Pieces{"x", "=", "12345", ";"}));
  // Unicode letters need UCP: accented Latin and CJK stay in one letter run.
  EXPECT_EQ(split("gpt2", "café naïve 你好"), (Pieces{"café", " naïve", " 你好"}));
  // NBSP is Unicode whitespace, not a letter or "other".
  EXPECT_EQ(split("gpt2", "a\u00A0b"), (Pieces{"a", "\u00A0", "b"}));
  EXPECT_EQ(split("default", "Hello world!"), split("gpt2", "Hello world!"));
}

TEST(PreTokenizerRegex, Llama3) {
  EXPECT_EQ(split("llama3", "12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(split("llama3", "don't STOP"), (Pieces{"don", "'t", " STOP"}));
  EXPECT_EQ(split("llama3", "DON'T"), (Pieces{"DON", "'T"}));
  EXPECT_EQ(split("llama3", "Hello\n\nworld"), (Pieces{"Hello", "\n\n", "world"}));
  EXPECT_EQ(split("llama3", "  hello"), (Pieces{" ", " hello"}));
  EXPECT_EQ(split("llama3", "(x)"), (Pieces{"(x", ")"}));
  EXPECT_EQ(split("llama-bpe", "12345"), split("llama3", "12345"));
}

TEST(PreTokenizerRegex, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split("qwen2", "a 2024!"), (Pieces{"a", " ", "2", "0", "2", "4", "!"}));
}

TEST(PreTokenizerRegex, StarCoderFamilySplitsDigitsThenGpt2) {
  for (const char* name : {"smollm", "starcoder", "refact"}) {
    EXPECT_EQ(split(name, "abc123 x"), (Pieces{"abc", "1", "2", "3", " x"})) << name;
    EXPECT_EQ(split(name, "v 42"), (Pieces{"v", " ", "4", "2"})) << name;
  }
}

TEST(PreTokenizerRegex, Gpt4o) {
  EXPECT_EQ(split("gpt-4o", "HelloWorld"), (Pieces{"Hello", "World"}));
  EXPECT_EQ(split("gpt-4o", "He's 12345"), (Pieces{"He's", " ", "123", "45"}));
  EXPECT_EQ(split("gpt-4o", "a/b\n"), (Pieces{"a", "/b", "\n"}));
}

TEST(PreTokenizerRegex, UnknownNameAndBadPattern) {
  EXPECT_FALSE(pretokenizer_patterns("no-such-pre").has_value());
  EXPECT_NE(known_pretokenizer_names().find("smollm"), std::string::npos);
  try {
    const SplitRegex bad("(unclosed");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos);
  }
}

// Whatever the input (random bytes included), the pieces concatenate back to it.
TEST(PreTokenizerRegex, PiecesCoverTheInput) {
  std::mt19937 rng(77);
  const std::vector<std::string> alphabet = {"a", "Z",  " ", "  ", "\n",   "\t",   "7",      "'s",
                                             "é", "中", "😀", "!",  "\xFF", "\xC3", "\u00A0", "_"};
  for (const char* name : {"gpt2", "llama3", "qwen2", "smollm", "gpt-4o"}) {
    const PreTokenizer pre(*pretokenizer_patterns(name));
    for (int trial = 0; trial < 200; ++trial) {
      std::string text;
      const size_t n = rng() % 24;
      for (size_t i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
      std::string joined;
      for (std::string_view p : pre.split(text)) {
        EXPECT_FALSE(p.empty());
        joined += p;
      }
      EXPECT_EQ(joined, text) << name;
    }
  }
}

}  // namespace
}  // namespace kvplan
