// Calibration files: text paragraphs, the three JSONL kinds, truncation to the context, the hash,
// and the errors for empty or malformed files.
#include "profile/calibration.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "test_paths.h"

namespace kvplan {
namespace {

TEST(Calibration, TextFileSplitsAtBlankLines) {
  const auto items =
      parse_calibration_text("first line\nsecond line\n\n\n  \nthird\r\n\nfourth", "t.txt", false);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].text, "first line\nsecond line");
  EXPECT_EQ(items[0].line, 1);
  EXPECT_EQ(items[1].text, "third");
  EXPECT_EQ(items[1].line, 6);
  EXPECT_EQ(items[2].text, "fourth");
}

TEST(Calibration, JsonlKinds) {
  const auto items = parse_calibration_text(
      "{\"text\": \"hello\"}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
      "{\"tokens\": [1, 5, 7]}\n",
      "c.jsonl", true);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].kind, CalibrationItem::Kind::kText);
  EXPECT_EQ(items[1].kind, CalibrationItem::Kind::kMessages);
  EXPECT_EQ(items[1].messages[0].content, "hi");
  EXPECT_EQ(items[2].kind, CalibrationItem::Kind::kTokens);
  EXPECT_EQ(items[2].tokens, (std::vector<int32_t>{1, 5, 7}));
  EXPECT_EQ(items[2].line, 4);
}

void expect_error(const std::string& text, bool jsonl, const std::string& fragment) {
  try {
    (void)parse_calibration_text(text, "bad.jsonl", jsonl);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Calibration, BadFilesNameFileAndLine) {
  expect_error("", false, "bad.jsonl: no prompts");
  expect_error("\n  \n\n", false, "no prompts");
  expect_error("{\"text\": \"a\"}\n{\"text\": 3}\n", true, "bad.jsonl:2: field 'text'");
  expect_error("{\"text\": \"a\"}\n{oops\n", true, "bad.jsonl:2: not a JSON object");
  expect_error("{\"prompt\": \"a\"}\n", true, "bad.jsonl:1: expected a field");
  expect_error("{\"tokens\": [1, -4]}\n", true, "tokens[1]");
  expect_error("{\"messages\": [{\"role\": \"user\"}]}\n", true, "messages[0]");
  const auto missing = std::filesystem::temp_directory_path() / "kvplan_no_such_prompts.txt";
  EXPECT_THROW(read_calibration_file(missing), Error);
}

class StoriesCalibration : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::models_dir() / "stories260K.gguf";
    KVPLAN_NEED_FILE(path_, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
    info_ = read_model_info(path_);
    tokenizer_ = load_model_tokenizer(path_);
  }
  std::filesystem::path path_;
  ModelInfo info_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(StoriesCalibration, TruncatesToTheContextAndHashesTokens) {
  const std::string long_text(4000, 'a');
  const auto items = parse_calibration_text("{\"text\": \"" + long_text +
                                                "\"}\n{\"text\": \"Once upon a time\"}\n"
                                                "{\"tokens\": [1, 2, 3]}\n"
                                                "{\"messages\": [{\"role\": \"user\", "
                                                "\"content\": \"hi there\"}]}\n",
                                            "c.jsonl", true);
  ModelConfig config = info_.config;
  config.context_length = 16;  // shorter than --max-tokens: the context wins
  const CalibrationSet set =
      tokenize_calibration(items, "c.jsonl", *tokenizer_, config, {.max_tokens = 64});
  ASSERT_EQ(set.prompts.size(), 4u);
  EXPECT_EQ(set.limit, 16);
  EXPECT_EQ(set.prompts[0].size(), 16u);
  EXPECT_EQ(set.n_truncated, 1);
  EXPECT_EQ(set.prompts[1], tokenizer_->encode("Once upon a time", {.add_bos = true}));
  EXPECT_EQ(set.prompts[2], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(set.chat_fallback);  // stories260K has no chat template
  EXPECT_EQ(set.prompts[3], tokenizer_->encode("user: hi there\n", {.add_bos = true}));
  int64_t total = 0;
  for (const auto& p : set.prompts) total += static_cast<int64_t>(p.size());
  EXPECT_EQ(set.n_tokens, total);
  // The hash is of the token ids: by hand with the documented field order.
  Hasher h;
  h.update("kvplan.calibration/v1");
  h.update_u64(set.prompts.size());
  for (const auto& p : set.prompts) {
    h.update_u64(p.size());
    for (const int32_t id : p) h.update_u64(static_cast<uint32_t>(id));
  }
  EXPECT_EQ(set.hash, h.digest());
  const CalibrationSet two = tokenize_calibration(items, "c.jsonl", *tokenizer_, config,
                                                  {.max_tokens = 64, .num_prompts = 2});
  EXPECT_EQ(two.prompts.size(), 2u);
  EXPECT_NE(two.hash, set.hash);
}

TEST_F(StoriesCalibration, RefusesTokensOutsideTheVocabulary) {
  const auto items = parse_calibration_text("{\"tokens\": [1, 999999]}\n", "c.jsonl", true);
  try {
    (void)tokenize_calibration(items, "c.jsonl", *tokenizer_, info_.config, {});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.jsonl:1: tokens[1] = 999999"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tokenize_calibration(items, "c.jsonl", *tokenizer_, info_.config, {.max_tokens = 1}),
               Error);
}

TEST(CalibrationSmolLM2, MessagesUseTheChatTemplate) {
  const auto path = test::smollm2_path();
  KVPLAN_NEED_FILE(path, "run scripts/models/fetch-smollm2.sh (or set KVPLAN_CACHE)");
  const ModelInfo info = read_model_info(path);
  const auto tok = load_model_tokenizer(path);
  const auto items = parse_calibration_text(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"What is two plus two?\"}]}\n", "c.jsonl",
      true);
  const CalibrationSet set = tokenize_calibration(items, "c.jsonl", *tok, info.config, {});
  const std::string rendered = tok->apply_chat_template({{"user", "What is two plus two?"}}, false);
  EXPECT_FALSE(set.chat_fallback);
  EXPECT_EQ(set.prompts[0], tok->encode(rendered, {.add_bos = true, .parse_special = true}));
  EXPECT_NE(rendered.find("<|im_start|>"), std::string::npos);
}

}  // namespace
}  // namespace kvplan
