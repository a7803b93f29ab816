#include "model/tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "gguf_builder.h"
#include "model/gguf_file.h"
#include "model/tokenizer/utf8.h"
#include "test_paths.h"

namespace kvplan {
namespace {

using test::GgufBuilder;

std::unique_ptr<Tokenizer> load_stories() {
  const GgufFile gguf(test::models_dir() / "stories260K.gguf", {.metadata_only = true});
  return Tokenizer::from_gguf(gguf);
}

#define SKIP_WITHOUT_STORIES()                              \
  KVPLAN_NEED_FILE(test::models_dir() / "stories260K.gguf", \
                   "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS")

// Naive SentencePiece BPE: rescan every adjacent pair after each merge and take the highest score
// (leftmost on ties). O(n^2), written independently of the priority-queue implementation.
std::vector<int32_t> naive_spm(const Tokenizer& tok, const Vocab& vocab, std::string_view text) {
  if (text.empty()) return {*tok.bos_id()};  // no text, no space prefix (SentencePiece, llama.cpp)
  std::string escaped = "\xE2\x96\x81";
  for (char c : text) escaped += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  std::vector<std::string> symbols;
  for (size_t i = 0; i < escaped.size();) {
    const size_t n = utf8_char_length(escaped, i);
    symbols.push_back(escaped.substr(i, n));
    i += n;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto id = vocab.find(symbols[i] + symbols[i + 1]);
      if (!id || vocab.type(*id) != TokenType::kNormal) continue;
      const float s = vocab.scores[static_cast<size_t>(*id)];
      if (best < 0 || s > best_score) {
        best = static_cast<int>(i);
        best_score = s;
      }
    }
    if (best < 0) break;
    symbols[static_cast<size_t>(best)] += symbols[static_cast<size_t>(best) + 1];
    symbols.erase(symbols.begin() + best + 1);
  }
  std::vector<int32_t> ids = {*tok.bos_id()};
  for (const std::string& s : symbols) {
    if (auto id = vocab.find(s)) {
      ids.push_back(*id);
      continue;
    }
    for (unsigned char c : s) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", c);
      ids.push_back(*vocab.find(name));
    }
  }
  return ids;
}

TEST(SpmTokenizer, Stories260KMetadata) {
  SKIP_WITHOUT_STORIES();
  const auto tok = load_stories();
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->stop_ids(), std::vector<int32_t>{2});
  EXPECT_EQ(tok->token_text(403), " Once");  // "▁Once" in the vocabulary
  EXPECT_EQ(tok->token_text(13), "\n");      // <0x0A>
}

TEST(SpmTokenizer, Stories260KOnceUponATime) {
  SKIP_WITHOUT_STORIES();
  const auto tok = load_stories();
  const std::vector<int32_t> ids = tok->encode("Once upon a time");
  // Pieces ▁Once ▁upon ▁a ▁time, ids looked up in the vocabulary by an independent script.
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->decode(ids), "Once upon a time");
  EXPECT_EQ(tok->encode("Once upon a time", {.add_bos = false}),
            (std::vector<int32_t>{403, 407, 261, 378}));
}

TEST(SpmTokenizer, Stories260KByteFallback) {
  SKIP_WITHOUT_STORIES();
  const auto tok = load_stories();
  const std::string text = "Lily's café — 42 ñ 😀";
  const std::vector<int32_t> ids = tok->encode(text);
  // The emoji is not in the 512-token vocabulary: its four UTF-8 bytes become <0xF0> <0x9F> <0x98>
  // <0x80>, which are ids 3 + byte.
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 4, ids.end()),
            (std::vector<int32_t>{3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}));
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(SpmTokenizer, Stories260KRoundTripsVariedText) {
  SKIP_WITHOUT_STORIES();
  const auto tok = load_stories();
  const Vocab& vocab = dynamic_cast<const VocabTokenizer&>(*tok).vocab();
  const std::vector<std::string> texts = {
      "Tom and Mia went to the park. They saw a big dog!",
      "\"Can I have it?\" asked Ben. \"No,\" said Mom.",
      "1, 2, 3... 1024 apples; 7% off?",
      "line one\nline two\n\n  indented\tand tabbed",
      "  two leading spaces and trailing  ",
      "Zoë’s naïve façade — déjà vu: 東京, Москва, ελληνικά 🦊🎉",
      "x",
      "",
      "\x01\x7f control bytes",
  };
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok->encode(text);
    EXPECT_EQ(tok->decode(ids), text) << text;
    EXPECT_EQ(ids, naive_spm(*tok, vocab, text)) << text;
  }
}

TEST(SpmTokenizer, Stories260KRandomBytesRoundTrip) {
  SKIP_WITHOUT_STORIES();
  const auto tok = load_stories();
  const Vocab& vocab = dynamic_cast<const VocabTokenizer&>(*tok).vocab();
  std::mt19937 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(1 + rng() % 40, '\0');
    // Half the characters from a small alphabet (so merges happen), half arbitrary bytes.
    for (char& ch : text)
      ch = (rng() & 1) ? " etaonh."[rng() % 8] : static_cast<char>(rng() & 0xFF);
    const std::vector<int32_t> ids = tok->encode(text);
    EXPECT_EQ(tok->decode(ids), text);
    EXPECT_EQ(ids, naive_spm(*tok, vocab, text));
  }
}

TEST(SpmTokenizer, Stories260KParseSpecial) {
  SKIP_WITHOUT_STORIES();
  const auto tok = load_stories();
  const auto plain = tok->encode("a</s>", {.add_bos = false});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  const auto special = tok->encode("a</s>", {.add_bos = false, .parse_special = true});
  ASSERT_FALSE(special.empty());
  EXPECT_EQ(special.back(), 2);
}

TEST(SpmTokenizer, Stories260KEncodesTheSampleFileAndRoundTrips) {
  SKIP_WITHOUT_STORIES();
  const std::filesystem::path sample = test::data_dir() / "tinystories-valid-sample.txt";
  KVPLAN_NEED_FILE(sample, "test data: ../shared/data or $KVPLAN_TEST_DATA");
  std::ifstream in(sample, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const auto tok = load_stories();
  const std::vector<int32_t> ids = tok->encode(text);
  EXPECT_EQ(tok->decode(ids), text);
  // A 512-token vocabulary on simple English: a few characters per token on average.
  EXPECT_GT(ids.size(), text.size() / 6);
  EXPECT_LT(ids.size(), text.size() / 2);
}

// Synthetic vocabularies check the merge order rules directly.
class SpmSyntheticTest : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> make(const std::vector<std::string>& tokens,
                                  const std::vector<float>& scores,
                                  const std::vector<int32_t>& types, bool add_space_prefix) {
    const auto dir = test::make_temp_dir("spm_synthetic");
    GgufBuilder b;
    b.add_string("tokenizer.ggml.model", "llama")
        .add_strings("tokenizer.ggml.tokens", tokens)
        .add_f32s("tokenizer.ggml.scores", scores)
        .add_i32s("tokenizer.ggml.token_type", types)
        .add_bool("tokenizer.ggml.add_space_prefix", add_space_prefix);
    b.write(dir / "spm.gguf");
    return Tokenizer::from_gguf(GgufFile(dir / "spm.gguf"));
  }
};

TEST_F(SpmSyntheticTest, HighestScoreFirstLeftmostOnTies) {
  // ids:                 0        1      2       3    4    5     6     7      8
  const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a",           "b",
                                           "ab",    "ba",  "aba",  "\xE2\x96\x81"};
  const std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1};
  {
    // "ab" and "ba" tie: the leftmost pair merges first, then "ab"+"a" is a token.
    const auto tok = make(tokens, {0, 0, 0, -1, -1, -5, -5, -6, -1}, types, false);
    EXPECT_EQ(tok->encode("aba"), (std::vector<int32_t>{1, 7}));
    // a|b|a|b: the first "ab" merges, then the second "ab" (-5) beats "ab"+"a" = "aba" (-6).
    EXPECT_EQ(tok->encode("abab", {.add_bos = false}), (std::vector<int32_t>{5, 5}));
  }
  {
    // "ba" outscores "ab": in "bab" the left pair merges and "ba"+"b" is not a token.
    const auto tok = make(tokens, {0, 0, 0, -1, -1, -5, -4, -6, -1}, types, false);
    EXPECT_EQ(tok->encode("bab", {.add_bos = false}), (std::vector<int32_t>{6, 4}));
  }
  {
    // "ab" outscores "ba": in "bab" the right pair merges.
    const auto tok = make(tokens, {0, 0, 0, -1, -1, -4, -5, -6, -1}, types, false);
    EXPECT_EQ(tok->encode("bab", {.add_bos = false}), (std::vector<int32_t>{4, 5}));
  }
}

TEST_F(SpmSyntheticTest, UnknownCharacterWithoutByteTokensIsUnk) {
  const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a", "\xE2\x96\x81"};
  const auto tok = make(tokens, {0, 0, 0, -1, -1}, {2, 3, 3, 1, 1}, true);
  EXPECT_EQ(tok->encode("a\xC3\xA9", {.add_bos = false}), (std::vector<int32_t>{4, 3, 0}));
}

}  // namespace
}  // namespace kvplan
