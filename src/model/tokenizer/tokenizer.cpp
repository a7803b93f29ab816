// Tokenizer::from_gguf: reads the tokenizer.ggml.* metadata, validates it and builds the tokenizer
// named by tokenizer.ggml.model.
#include "model/tokenizer/tokenizer.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/pretokenizer_regex.h"
#include "model/tokenizer/spm_tokenizer.h"
#include "model/tokenizer/vocab.h"

namespace kvplan {
namespace {

constexpr const char* kModelKey = "tokenizer.ggml.model";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kMergesKey = "tokenizer.ggml.merges";
constexpr const char* kPreKey = "tokenizer.ggml.pre";

std::string file_name(const GgufFile& gguf) {
  return gguf.path().string();
}

const GgufValue& get_typed_array(const GgufFile& gguf, const char* key, bool strings) {
  const GgufValue& v = gguf.get_array(key);
  const bool is_strings = v.element_type == GgufValueType::kString;
  if (strings != is_strings) {
    fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' is an array of {}, expected {}",
         file_name(gguf), key, is_strings ? "strings" : "numbers", strings ? "strings" : "numbers");
  }
  return v;
}

void check_length(const GgufFile& gguf, const char* key, size_t n, size_t n_tokens) {
  if (n != n_tokens) {
    fail(ErrorCode::kInvalidArgument,
         "{}: metadata '{}' has {} entries, expected {} (one per token)", file_name(gguf), key, n,
         n_tokens);
  }
}

bool find_bool(const GgufFile& gguf, const std::string& key, bool fallback) {
  const GgufValue* v = gguf.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_numeric()) {
    fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' is not a bool", file_name(gguf), key);
  }
  return v->number != 0;
}

// A special token id key: absent, -1 or 0xFFFFFFFF mean "none"; anything else must be a token.
std::optional<int32_t> find_token_id(const GgufFile& gguf, const Vocab& vocab,
                                     const std::string& key, std::optional<int32_t> fallback) {
  const GgufValue* v = gguf.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_numeric() || v->number != std::floor(v->number)) {
    fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' is not an integer token id",
         file_name(gguf), key);
  }
  if (v->number == -1 || v->number == static_cast<double>(std::numeric_limits<uint32_t>::max())) {
    return std::nullopt;
  }
  if (v->number < 0 || v->number >= vocab.size()) {
    fail(ErrorCode::kOutOfRange, "{}: metadata '{}' = {} is not a token id (vocabulary has {})",
         file_name(gguf), key, v->number, vocab.size());
  }
  return static_cast<int32_t>(v->number);
}

Vocab read_vocab(const GgufFile& gguf, bool need_scores) {
  Vocab vocab;
  vocab.source = file_name(gguf);
  vocab.tokens = get_typed_array(gguf, kTokensKey, true).strings;
  const size_t n = vocab.tokens.size();
  if (n == 0 || n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' has {} tokens, expected 1..2^31-1",
         vocab.source, kTokensKey, n);
  }

  vocab.types.assign(n, TokenType::kNormal);
  if (gguf.has(kTypesKey)) {
    const std::vector<double>& types = get_typed_array(gguf, kTypesKey, false).numbers;
    check_length(gguf, kTypesKey, types.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const double t = types[i];
      if (t != std::floor(t) || t < 0 || t >= kTokenTypeCount) {
        fail(ErrorCode::kInvalidArgument,
             "{}: metadata '{}'[{}] = {} (token '{}'): expected a token type 0..{}", vocab.source,
             kTypesKey, i, t, vocab.tokens[i], kTokenTypeCount - 1);
      }
      vocab.types[i] = static_cast<TokenType>(static_cast<int>(t));
    }
  }

  if (need_scores || gguf.has(kScoresKey)) {
    const std::vector<double>& scores = get_typed_array(gguf, kScoresKey, false).numbers;
    check_length(gguf, kScoresKey, scores.size(), n);
    vocab.scores.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(scores[i])) {
        fail(ErrorCode::kInvalidArgument, "{}: metadata '{}'[{}] = {} is not a finite score",
             vocab.source, kScoresKey, i, scores[i]);
      }
      vocab.scores.push_back(static_cast<float>(scores[i]));
    }
  }
  vocab.build_index();
  vocab.chat_template = gguf.find_string("tokenizer.chat_template").value_or("");
  return vocab;
}

void read_special_ids(const GgufFile& gguf, Vocab& vocab, bool spm) {
  // llama.cpp's defaults for SentencePiece vocabularies: <unk> 0, <s> 1, </s> 2.
  auto spm_default = [&](int32_t id) -> std::optional<int32_t> {
    if (spm && id < vocab.size()) return id;
    return std::nullopt;
  };
  vocab.bos_id = find_token_id(gguf, vocab, "tokenizer.ggml.bos_token_id", spm_default(1));
  vocab.eos_id = find_token_id(gguf, vocab, "tokenizer.ggml.eos_token_id", spm_default(2));
  vocab.unk_id = find_token_id(gguf, vocab, "tokenizer.ggml.unknown_token_id", spm_default(0));
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (auto id = find_token_id(gguf, vocab, key, std::nullopt)) {
      vocab.extra_stop_ids.push_back(*id);
    }
  }
  vocab.add_bos = find_bool(gguf, "tokenizer.ggml.add_bos_token", spm);
  vocab.add_eos = find_bool(gguf, "tokenizer.ggml.add_eos_token", false);
}

std::vector<BpeMerge> read_merges(const GgufFile& gguf) {
  const std::vector<std::string>& lines = get_typed_array(gguf, kMergesKey, true).strings;
  std::vector<BpeMerge> merges;
  merges.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      fail(ErrorCode::kInvalidArgument,
           "{}: metadata '{}'[{}] = '{}': expected two tokens separated by one space",
           file_name(gguf), kMergesKey, i, line);
    }
    merges.push_back({line.substr(0, space), line.substr(space + 1)});
  }
  return merges;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  const std::string model = gguf.get_string(kModelKey);
  if (model == "llama") {
    Vocab vocab = read_vocab(gguf, /*need_scores=*/true);
    read_special_ids(gguf, vocab, /*spm=*/true);
    SpmOptions options;
    options.add_space_prefix = find_bool(gguf, "tokenizer.ggml.add_space_prefix", true);
    return std::make_unique<SpmTokenizer>(std::move(vocab), options);
  }
  if (model == "gpt2") {
    Vocab vocab = read_vocab(gguf, /*need_scores=*/false);
    read_special_ids(gguf, vocab, /*spm=*/false);
    const std::string pre = gguf.find_string(kPreKey).value_or("default");
    std::optional<std::vector<std::string>> patterns = pretokenizer_patterns(pre);
    if (!patterns) {
      fail(ErrorCode::kUnimplemented,
           "{}: metadata '{}' = '{}' names a pre-tokenizer kvplan does not know (known: {})",
           file_name(gguf), kPreKey, pre, known_pretokenizer_names());
    }
    BpeOptions options;
    options.pre_patterns = std::move(*patterns);
    options.ignore_merges = pre == "llama3" || pre == "llama-bpe";
    return std::make_unique<BpeTokenizer>(std::move(vocab), read_merges(gguf), options,
                                          "metadata 'tokenizer.ggml.merges'");
  }
  fail(ErrorCode::kUnimplemented,
       "{}: metadata '{}' = '{}' is not a tokenizer kvplan supports (expected 'llama' or 'gpt2')",
       file_name(gguf), kModelKey, model);
}

}  // namespace kvplan
