#include "model/tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "model/gguf_file.h"
#include "test_paths.h"

namespace kvplan {
namespace {

#define SKIP_WITHOUT_SMOLLM2()                                                                 \
  if (!std::filesystem::exists(test::smollm2_path())) {                                        \
    GTEST_SKIP() << test::smollm2_path()                                                       \
                 << " not found (fetch it with scripts/fetch-smollm2.sh or set KVPLAN_CACHE)"; \
  }

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
  if (!std::filesystem::exists(sample)) GTEST_SKIP() << sample << " not found";
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
