// Tokenizer::from_hf_json on small synthetic tokenizer.json / tokenizer_config.json files.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "gguf_builder.h"
#include "model/tokenizer/tokenizer.h"

namespace kvplan {
namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// ids: 0 h 1 e 2 l 3 o 4 Ġ 5 w 6 r 7 d 8 he 9 ll 10 hell 11 hello 12 Ġw 13 Ġwor 14 or 15 Ġworld
//      16 1 17 2 18 <|im_start|> 19 <|im_end|> 20 <|eos|>
// Merges mix the "a b" and ["a", "b"] spellings; "l l" ranks above "h e" on purpose.
constexpr const char* kTokenizerJson = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 18, "content": "<|im_start|>", "special": true},
    {"id": 19, "content": "<|im_end|>", "special": true},
    {"id": 20, "content": "<|eos|>", "special": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": true},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
  ]},
  "post_processor": null,
  "decoder": {"type": "ByteLevel"},
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7, "he": 8, "ll": 9,
              "hell": 10, "hello": 11, "Ġw": 12, "Ġwor": 13, "or": 14, "Ġworld": 15,
              "1": 16, "2": 17},
    "merges": ["l l", ["h", "e"], "he ll", "hell o", "Ġ w", "o r", "Ġw or", ["Ġwor", "ld"]]
  }
})";

TEST(HfTokenizerJson, RejectsMergeOfUnknownToken) {
  const auto dir = test::make_temp_dir("hf_bad_merge");
  write_file(dir / "tokenizer.json", kTokenizerJson);
  // "ld" is not in the vocabulary above.
  try {
    (void)Tokenizer::from_hf_json(dir / "tokenizer.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'model.merges'[7]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'ld'"), std::string::npos) << e.what();
  }
}

std::string fixed_json() {
  std::string json = kTokenizerJson;
  json.replace(json.find(R"(["Ġwor", "ld"])"), std::string(R"(["Ġwor", "ld"])").size(),
               R"("Ġwor l", "Ġworl d")");
  json.replace(json.find(R"("2": 17})"), std::string(R"("2": 17})").size(),
               R"("2": 17, "Ġworl": 21})");
  return json;
}

TEST(HfTokenizerJson, EncodeDecodeWithConfig) {
  const auto dir = test::make_temp_dir("hf_ok");
  write_file(dir / "tokenizer.json", fixed_json());
  write_file(dir / "tokenizer_config.json", R"({
    "add_bos_token": false,
    "bos_token": {"content": "<|im_start|>", "lstrip": false},
    "eos_token": "<|eos|>",
    "chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
  })");
  const auto tok = Tokenizer::from_hf_json(dir / "tokenizer.json");
  EXPECT_EQ(tok->vocab_size(), 22);
  EXPECT_EQ(tok->bos_id(), 18);
  EXPECT_EQ(tok->eos_id(), 20);
  // "hello" -> h e l l o -> [l l] -> [h e] -> he ll -> hell o.
  EXPECT_EQ(tok->encode("hello"), std::vector<int32_t>{11});
  // " world" -> Ġ w o r l d -> Ġw, or -> Ġwor -> Ġworl -> Ġworld.
  EXPECT_EQ(tok->encode("hello world"), (std::vector<int32_t>{11, 15}));
  // Digits are split one by one before the byte-level step.
  EXPECT_EQ(tok->encode("12"), (std::vector<int32_t>{16, 17}));
  // "hold": no merge joins h and o, and "ld" is not a merge.
  EXPECT_EQ(tok->encode("hold"), (std::vector<int32_t>{0, 3, 2, 7}));
  EXPECT_EQ(tok->decode({11, 15, 4}), "hello world ");
  EXPECT_EQ(tok->encode("<|im_start|>hello", {.parse_special = true}),
            (std::vector<int32_t>{18, 11}));
  const std::vector<int32_t> stops = tok->stop_ids();
  EXPECT_EQ(stops, (std::vector<int32_t>{20, 19}));
  EXPECT_EQ(tok->apply_chat_template({{"user", "hello"}}, true),
            "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
}

// fixed_json() with its "pre_tokenizer" value replaced by `pre_tokenizer`.
std::string with_pre_tokenizer(const std::string& pre_tokenizer) {
  std::string json = fixed_json();
  const size_t begin = json.find("\"pre_tokenizer\"");
  const size_t end = json.find("\"post_processor\"");
  json.replace(begin, end - begin, "\"pre_tokenizer\": " + pre_tokenizer + ",\n  ");
  return json;
}

TEST(HfTokenizerJson, WithoutConfigAndSplitPreTokenizer) {
  const std::string json = with_pre_tokenizer(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": " ?\\p{L}+|\\p{N}{1,3}|\\s+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
  const auto dir = test::make_temp_dir("hf_split");
  write_file(dir / "tokenizer.json", json);
  const auto tok = Tokenizer::from_hf_json(dir / "tokenizer.json");
  EXPECT_FALSE(tok->bos_id().has_value());
  EXPECT_EQ(tok->encode("hello world"), (std::vector<int32_t>{11, 15}));
  EXPECT_EQ(tok->decode(tok->encode("hello 12 world")), "hello 12 world");
}

TEST(HfTokenizerJson, SplitPatternThatDoesNotCompileNamesFileAndField) {
  const std::string json = with_pre_tokenizer(
      R"({"type": "Split", "pattern": {"Regex": "(\\p{L}+"}, "behavior": "Isolated", "invert": false})");
  const auto dir = test::make_temp_dir("hf_bad_regex");
  write_file(dir / "tokenizer.json", json);
  try {
    (void)Tokenizer::from_hf_json(dir / "tokenizer.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what;
    EXPECT_NE(what.find("tokenizer.json"), std::string::npos) << what;
    EXPECT_NE(what.find("pre_tokenizer.pattern"), std::string::npos) << what;
    EXPECT_NE(what.find("does not compile"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(HfTokenizerJson, UnsupportedModelTypeAndBadJson) {
  const auto dir = test::make_temp_dir("hf_unsupported");
  write_file(dir / "tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  try {
    (void)Tokenizer::from_hf_json(dir / "tokenizer.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("model.type"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("WordPiece"), std::string::npos) << e.what();
  }
  write_file(dir / "tokenizer.json", "{\"model\": ");
  try {
    (void)Tokenizer::from_hf_json(dir / "tokenizer.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
  try {
    (void)Tokenizer::from_hf_json(dir / "missing.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

// Fuzz/review finding: vocabulary tables are sized by the largest token id, so a 40-byte file with
// the id 2^24 - 1 allocated half a gigabyte. Ids must also be below the file's size.
TEST(HfTokenizerJson, TokenIdsAreBoundedByTheFileSize) {
  const std::string small = R"({"model": {"type": "BPE", "vocab": {"a": 16000000}, "merges": []},
                               "pre_tokenizer": {"type": "ByteLevel"}})";
  try {
    (void)Tokenizer::from_hf_json_text(small, "", "t/tokenizer.json");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t/tokenizer.json: field 'model.vocab['a']': expected a "
                                         "token id in 0..255"),
              std::string::npos)
        << e.what();
  }
}

// The in-memory entry point reads tokenizer_config.json's text as from_hf_json reads the file.
TEST(HfTokenizerJson, FromTextWithConfig) {
  const auto tok = Tokenizer::from_hf_json_text(
      fixed_json(), R"({"add_bos_token": false, "eos_token": "<|eos|>"})", "t/tokenizer.json");
  EXPECT_EQ(tok->eos_id(), 20);
  EXPECT_EQ(tok->encode("hello world"), (std::vector<int32_t>{11, 15}));
}

}  // namespace
}  // namespace kvplan
