// Tokenizer::from_gguf on synthetic GGUF files: dispatch, a small byte-level BPE vocabulary, and
// every validation error naming the file and the metadata key.
#include "model/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "gguf_builder.h"
#include "model/gguf_file.h"

namespace kvplan {
namespace {

using test::GgufBuilder;

// "Ġ" (U+0120) is a space in GPT-2's byte mapping.
const std::string kG = "\xC4\xA0";

// ids: 0 <|end|>  1 <|start|>  2 a  3 b  4 c  5 Ġ  6 ab  7 abc  8 Ġabc  9 Ġa
GgufBuilder small_bpe() {
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "gpt2")
      .add_string("tokenizer.ggml.pre", "gpt2")
      .add_strings("tokenizer.ggml.tokens",
                   {"<|end|>", "<|start|>", "a", "b", "c", kG, "ab", "abc", kG + "abc", kG + "a"})
      .add_i32s("tokenizer.ggml.token_type", {3, 3, 1, 1, 1, 1, 1, 1, 1, 1})
      .add_strings("tokenizer.ggml.merges", {"a b", "ab c", kG + " abc", kG + " a"})
      .add_u32("tokenizer.ggml.eos_token_id", 0)
      .add_u32("tokenizer.ggml.bos_token_id", 1)
      .add_string("tokenizer.chat_template", "{{ '<|start|>' }}{{ messages }}");
  return b;
}

std::unique_ptr<Tokenizer> load(const GgufBuilder& b, const std::string& name) {
  const auto path = test::make_temp_dir(name) / "model.gguf";
  b.write(path);
  return Tokenizer::from_gguf(GgufFile(path));
}

// Runs `f`, expects Error with `code` whose message contains every string of `parts`.
void expect_error(const std::function<void()>& f, ErrorCode code,
                  const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << e.what() << "' lacks '" << p << "'";
    }
  }
}

TEST(TokenizerGguf, SmallByteLevelBpe) {
  const auto tok = load(small_bpe(), "small_bpe");
  EXPECT_EQ(tok->vocab_size(), 10);
  // "abc" -> a b c -> ab c (rank 0) -> abc (rank 1); " abc" -> Ġ a b c -> ... -> Ġabc (rank 2):
  // "a b" outranks "Ġ a", so Ġ joins only the finished "abc".
  EXPECT_EQ(tok->encode("abc abc"), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(tok->encode(" ab"), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(tok->encode("cab"), (std::vector<int32_t>{4, 6}));
  EXPECT_EQ(tok->decode({7, 8, 5}), "abc abc ");
  // No add_bos_token key: byte-level BPE adds no BOS.
  EXPECT_EQ(tok->encode("a<|end|>", {.parse_special = true}), (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(tok->stop_ids(), std::vector<int32_t>{0});
}

TEST(TokenizerGguf, AddBosAndEosFromMetadata) {
  GgufBuilder b = small_bpe();
  b.add_bool("tokenizer.ggml.add_bos_token", true).add_bool("tokenizer.ggml.add_eos_token", true);
  const auto tok = load(b, "bos_eos");
  EXPECT_EQ(tok->encode("ab"), (std::vector<int32_t>{1, 6, 0}));
  EXPECT_EQ(tok->encode("ab", {.add_bos = false}), (std::vector<int32_t>{6}));
  EXPECT_EQ(tok->decode({1, 6}), "ab");  // the BOS encode() adds is not rendered
}

TEST(TokenizerGguf, UnknownModel) {
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "wordpiece").add_strings("tokenizer.ggml.tokens", {"a"});
  expect_error([&] { (void)load(b, "unknown_model"); }, ErrorCode::kUnimplemented,
               {"model.gguf", "tokenizer.ggml.model", "wordpiece"});
}

TEST(TokenizerGguf, MissingModelKey) {
  GgufBuilder b;
  b.add_strings("tokenizer.ggml.tokens", {"a"});
  expect_error([&] { (void)load(b, "no_model"); }, ErrorCode::kNotFound, {"tokenizer.ggml.model"});
}

TEST(TokenizerGguf, ScoresLengthMismatch) {
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "llama")
      .add_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b"})
      .add_f32s("tokenizer.ggml.scores", {0.f, 0.f, 0.f});
  expect_error([&] { (void)load(b, "scores_len"); }, ErrorCode::kInvalidArgument,
               {"model.gguf",
                "metadata 'tokenizer.ggml.scores' has 3 entries, expected 5 (one "
                "per token)"});
}

TEST(TokenizerGguf, MissingScoresForLlama) {
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "llama").add_strings("tokenizer.ggml.tokens", {"a"});
  expect_error([&] { (void)load(b, "no_scores"); }, ErrorCode::kNotFound,
               {"tokenizer.ggml.scores"});
}

TEST(TokenizerGguf, TokenTypeLengthAndValue) {
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "gpt2")
      .add_strings("tokenizer.ggml.tokens", {"a", "b"})
      .add_i32s("tokenizer.ggml.token_type", {1})
      .add_strings("tokenizer.ggml.merges", {});
  expect_error([&] { (void)load(b, "types_len"); }, ErrorCode::kInvalidArgument,
               {"tokenizer.ggml.token_type", "has 1 entries, expected 2"});
  GgufBuilder bad_value;
  bad_value.add_string("tokenizer.ggml.model", "gpt2")
      .add_strings("tokenizer.ggml.tokens", {"a", "b"})
      .add_i32s("tokenizer.ggml.token_type", {1, 9})
      .add_strings("tokenizer.ggml.merges", {});
  expect_error([&] { (void)load(bad_value, "types_value"); }, ErrorCode::kInvalidArgument,
               {"tokenizer.ggml.token_type", "[1] = 9"});
}

TEST(TokenizerGguf, SpecialIdOutOfRange) {
  GgufBuilder b = small_bpe();
  b.add_u32("tokenizer.ggml.eot_token_id", 10);
  expect_error([&] { (void)load(b, "eot_range"); }, ErrorCode::kOutOfRange,
               {"tokenizer.ggml.eot_token_id", "10"});
}

TEST(TokenizerGguf, NoneSpecialIdIsAccepted) {
  GgufBuilder b = small_bpe();
  b.add_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu)
      .add_i32("tokenizer.ggml.eot_token_id", -1);
  EXPECT_EQ(load(b, "none_ids")->stop_ids(), std::vector<int32_t>{0});
}

TEST(TokenizerGguf, MalformedMerges) {
  for (const std::string& merge : {std::string("ab"), std::string(" a"), std::string("a b c")}) {
    GgufBuilder b;
    b.add_string("tokenizer.ggml.model", "gpt2")
        .add_strings("tokenizer.ggml.tokens", {"a", "b", "ab"})
        .add_strings("tokenizer.ggml.merges", {"a b", merge});
    expect_error([&] { (void)load(b, "bad_merge"); }, ErrorCode::kInvalidArgument,
                 {"'tokenizer.ggml.merges'[1]", "'" + merge + "'"});
  }
  GgufBuilder unknown_part;
  unknown_part.add_string("tokenizer.ggml.model", "gpt2")
      .add_strings("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .add_strings("tokenizer.ggml.merges", {"a b", "ab x"});
  expect_error([&] { (void)load(unknown_part, "merge_unknown"); }, ErrorCode::kInvalidArgument,
               {"'tokenizer.ggml.merges'[1]", "'x' is not a token"});
}

TEST(TokenizerGguf, UnknownPreTokenizer) {
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "gpt2")
      .add_string("tokenizer.ggml.pre", "chameleon-9000")
      .add_strings("tokenizer.ggml.tokens", {"a"})
      .add_strings("tokenizer.ggml.merges", {});
  expect_error([&] { (void)load(b, "unknown_pre"); }, ErrorCode::kUnimplemented,
               {"tokenizer.ggml.pre", "chameleon-9000"});
}

TEST(TokenizerGguf, WrongArrayType) {
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "llama")
      .add_strings("tokenizer.ggml.tokens", {"a"})
      .add_strings("tokenizer.ggml.scores", {"high"});
  expect_error([&] { (void)load(b, "scores_type"); }, ErrorCode::kInvalidArgument,
               {"tokenizer.ggml.scores", "strings"});
}

TEST(TokenizerGguf, UnrecognisedOrMissingChatTemplate) {
  const auto tok = load(small_bpe(), "odd_template");
  expect_error(
      [&] {
        (void)tok->apply_chat_template({{"user", "x"}}, true);
      },
      ErrorCode::kUnimplemented, {"model.gguf", "not recognised"});
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "gpt2")
      .add_strings("tokenizer.ggml.tokens", {"a"})
      .add_strings("tokenizer.ggml.merges", {});
  const auto plain = load(b, "no_template");
  expect_error(
      [&] {
        (void)plain->apply_chat_template({{"user", "x"}}, true);
      },
      ErrorCode::kUnimplemented, {"no chat template"});
}

TEST(TokenizerGguf, DecodeRejectsOutOfRangeIds) {
  const auto tok = load(small_bpe(), "decode_range");
  expect_error([&] { (void)tok->decode({2, 10}); }, ErrorCode::kOutOfRange, {"10", "0..9"});
  expect_error([&] { (void)tok->token_text(-1); }, ErrorCode::kOutOfRange, {"-1"});
}

}  // namespace
}  // namespace kvplan
