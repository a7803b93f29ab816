#include "model/tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <random>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/tokenizer/byte_unicode.h"
#include "model/tokenizer/utf8.h"
#include "test_paths.h"

namespace kvplan {
namespace {

#define SKIP_WITHOUT_SMOLLM2()           \
  KVPLAN_NEED_FILE(test::smollm2_path(), \
                   "run scripts/models/fetch-smollm2.sh (or set KVPLAN_CACHE)")

const Tokenizer& smollm2() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    const GgufFile gguf(test::smollm2_path(), {.metadata_only = true});
    return Tokenizer::from_gguf(gguf);
  }();
  return *tok;
}

std::vector<std::string> pieces(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  const Vocab& vocab = dynamic_cast<const VocabTokenizer&>(tok).vocab();
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(vocab.text(id));
  return out;
}

// Naive byte-level BPE over one pre-tokenized piece: re-scan all adjacent pairs after every merge
// and apply the lowest-ranked one (leftmost on ties). O(n^2), independent of the priority queue.
std::vector<int32_t> naive_bpe_piece(
    const Vocab& vocab, const std::map<std::pair<std::string, std::string>, size_t>& ranks,
    std::string_view piece) {
  const std::string mapped = bytes_to_unicode_text(piece);
  std::vector<std::string> symbols;
  for (size_t i = 0; i < mapped.size();) {
    const size_t n = utf8_char_length(mapped, i);
    symbols.push_back(mapped.substr(i, n));
    i += n;
  }
  for (;;) {
    size_t best = symbols.size();
    size_t best_rank = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = ranks.find({symbols[i], symbols[i + 1]});
      if (it != ranks.end() && (best == symbols.size() || it->second < best_rank)) {
        best = i;
        best_rank = it->second;
      }
    }
    if (best == symbols.size()) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& s : symbols) ids.push_back(vocab.find(s).value_or(-1));
  return ids;
}

TEST(BpeTokenizer, SmolLM2MatchesNaiveMergeOrder) {
  SKIP_WITHOUT_SMOLLM2();
  const GgufFile gguf(test::smollm2_path(), {.metadata_only = true});
  std::map<std::pair<std::string, std::string>, size_t> ranks;
  const std::vector<std::string>& merges = gguf.get_array("tokenizer.ggml.merges").strings;
  for (size_t i = 0; i < merges.size(); ++i) {
    const size_t space = merges[i].find(' ');
    ranks.try_emplace({merges[i].substr(0, space), merges[i].substr(space + 1)}, i);
  }
  const Tokenizer& tok = smollm2();
  const Vocab& vocab = dynamic_cast<const VocabTokenizer&>(tok).vocab();
  const PreTokenizer pre(*pretokenizer_patterns("smollm"));
  // Random words from a mixed alphabet: long runs of repeated letters stress the merge order.
  const std::vector<std::string> alphabet = {"a",  "e",  "n",  "t",  "s",  "th", "in",
                                             "er", "ll", " ",  "\n", "  ", "0",  "9",
                                             "é",  "ß",  "的", "я",  "(",  "'s"};
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const size_t n = 1 + rng() % 30;
    for (size_t i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> expected;
    for (std::string_view piece : pre.split(text)) {
      for (int32_t id : naive_bpe_piece(vocab, ranks, piece)) expected.push_back(id);
    }
    const std::vector<int32_t> ids = tok.encode(text);
    EXPECT_EQ(ids, expected) << text;
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(BpeTokenizer, SmolLM2Metadata) {
  SKIP_WITHOUT_SMOLLM2();
  const Tokenizer& tok = smollm2();
  EXPECT_EQ(tok.vocab_size(), 49152);
  EXPECT_EQ(tok.bos_id(), 1);  // <|im_start|>, but add_bos_token is false
  EXPECT_EQ(tok.eos_id(), 2);  // <|im_end|>
  const std::vector<int32_t> stops = tok.stop_ids();
  EXPECT_EQ(stops.front(), 2);
  EXPECT_NE(std::find(stops.begin(), stops.end(), 0), stops.end());  // <|endoftext|>
}

TEST(BpeTokenizer, SmolLM2HelloWorld) {
  SKIP_WITHOUT_SMOLLM2();
  const Tokenizer& tok = smollm2();
  // add_bos_token is false in the file: no BOS even though add_bos defaults to true.
  const std::vector<int32_t> ids = tok.encode("Hello world");
  EXPECT_EQ(pieces(tok, ids), (std::vector<std::string>{"Hello", "\xC4\xA0world"}));
  EXPECT_EQ(tok.decode(ids), "Hello world");
}

// Expected pieces worked out by a separate naive Python BPE (re-scan of all pairs, `regex` module
// for the split) from the file's merges; the digit splitting is SmolLM2's Digits(individual) step.
TEST(BpeTokenizer, SmolLM2KnownSegmentations) {
  SKIP_WITHOUT_SMOLLM2();
  const Tokenizer& tok = smollm2();
  EXPECT_EQ(tok.encode("The year 2024 had 366 days."),
            (std::vector<int32_t>{504, 713, 216, 34, 32, 34, 36, 761, 216, 35, 38, 38, 2009, 30}));
  EXPECT_EQ(pieces(tok, tok.encode("def f(x):\n    return x  # comment\n")),
            (std::vector<std::string>{"def",
                                      "\xC4\xA0"
                                      "f",
                                      "(", "x", "):", "\xC4\x8A\xC4\xA0\xC4\xA0\xC4\xA0",
                                      "\xC4\xA0return", "\xC4\xA0x", "\xC4\xA0", "\xC4\xA0#",
                                      "\xC4\xA0"
                                      "comment",
                                      "\xC4\x8A"}));
  EXPECT_EQ(tok.encode("Bonjour, ça va? Grüße! 你好世界 Привет こんにちは 😀").size(), 39u);
}

TEST(BpeTokenizer, SmolLM2RoundTrips) {
  SKIP_WITHOUT_SMOLLM2();
  const Tokenizer& tok = smollm2();
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog. It's 3:45pm; we'd've left by 4.",
      "import numpy as np\n\nclass Foo:\n    def bar(self, x):\n        if x > 0:\n"
      "            return np.sqrt(x)  # root\n        return -1\n",
      "Le cœur a ses raisons que la raison ne connaît point.",
      "Größenänderung: Straße, Übermut, ähnlich.",
      "机器学习是人工智能的一个分支。",
      "Съешь же ещё этих мягких французских булок, да выпей чаю.",
      "いろはにほへと ちりぬるを、カタカナも。",
      "Emoji: 😀👍🏽🇫🇷 and ZWJ 👩‍💻!",
      "   leading spaces, trailing tabs\t\t\n\n\r\n",
      "",
      "x",
      "\x80\xC3( invalid UTF-8 \xE2\x82",
  };
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text) << text;
    std::string streamed;
    for (int32_t id : ids) streamed += tok.token_text(id);
    EXPECT_EQ(streamed, text) << text;
  }
}

TEST(BpeTokenizer, SmolLM2UnrepresentableByteIsUnk) {
  SKIP_WITHOUT_SMOLLM2();
  const Tokenizer& tok = smollm2();
  // Bytes that never occur in UTF-8 (0xFF, 0xC0) have no token in SmolLM2's vocabulary; they
  // become <unk> (= <|endoftext|>, id 0, per tokenizer.ggml.unknown_token_id).
  EXPECT_EQ(tok.encode("\xFF"), std::vector<int32_t>{0});
  EXPECT_EQ(tok.encode("a\xC0"),
            (std::vector<int32_t>{*dynamic_cast<const VocabTokenizer&>(tok).vocab().find("a"), 0}));
}

TEST(BpeTokenizer, SmolLM2SpecialTokens) {
  SKIP_WITHOUT_SMOLLM2();
  const Tokenizer& tok = smollm2();
  const std::string text = "<|im_start|>user\nHi<|im_end|>\n";
  const std::vector<int32_t> ids = tok.encode(text, {.parse_special = true});
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 2), ids.end());
  EXPECT_EQ(tok.decode(ids), text);
  // Without parse_special the markers are ordinary text.
  const std::vector<int32_t> plain = tok.encode(text);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(tok.decode(plain), text);
  EXPECT_EQ(tok.encode("<|endoftext|>", {.parse_special = true}), std::vector<int32_t>{0});
  EXPECT_EQ(tok.encode("<repo_name>x", {.parse_special = true}).front(), 3);
}

TEST(BpeTokenizer, SmolLM2ChatTemplate) {
  SKIP_WITHOUT_SMOLLM2();
  const Tokenizer& tok = smollm2();
  EXPECT_EQ(tok.apply_chat_template({{"system", "Be brief."}, {"user", "What is 2+2?"}}, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  // SmolLM2's template supplies its own system message when the conversation has none.
  EXPECT_EQ(tok.apply_chat_template({{"user", "Hi"}, {"assistant", "Hello!"}}, false),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n");
}

TEST(BpeTokenizer, SmolLM2EncodesTheSampleFileAndRoundTrips) {
  SKIP_WITHOUT_SMOLLM2();
  const std::filesystem::path sample = test::data_dir() / "tinystories-valid-sample.txt";
  KVPLAN_NEED_FILE(sample, "test data: ../shared/data or $KVPLAN_TEST_DATA");
  std::ifstream in(sample, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const std::vector<int32_t> ids = smollm2().encode(text);
  EXPECT_EQ(smollm2().decode(ids), text);
  EXPECT_GT(ids.size(), text.size() / 8);
  EXPECT_LT(ids.size(), text.size() / 3);
}

}  // namespace
}  // namespace kvplan
