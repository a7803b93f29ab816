// Vocab: the token table every tokenizer implementation shares, and VocabTokenizer, the part of
// the Tokenizer interface that only needs the table (ids, BOS/EOS, stop ids, chat template).
//
// Token types follow GGUF's `tokenizer.ggml.token_type` (llama.cpp's llama_token_type): 1 normal,
// 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte. Control and user-defined tokens are the
// "special" ones that are matched as whole strings in the input (see split_special_tokens).
//
//   kvplan::Vocab v;
//   v.tokens = {"<s>", "a"};  v.types = {TokenType::kControl, TokenType::kNormal};
//   v.build_index();
//   std::optional<int32_t> id = v.find("a");  // 1
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace kvplan {

enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};
inline constexpr int kTokenTypeCount = 7;

// Transparent hash so maps keyed by std::string can be probed with a string_view.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  std::string source;  // the file the vocabulary came from, for error messages
  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::vector<float> scores;  // SentencePiece piece scores; empty for BPE vocabularies
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> unk_id;
  std::vector<int32_t> extra_stop_ids;  // end-of-turn ids named by the metadata (eot, eom)
  bool add_bos = false;
  bool add_eos = false;
  std::string chat_template;

  // Builds the string -> id index (the first id wins for a duplicated string).
  void build_index();
  [[nodiscard]] std::optional<int32_t> find(std::string_view text) const;
  [[nodiscard]] int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  [[nodiscard]] TokenType type(int32_t id) const { return types[static_cast<size_t>(id)]; }
  [[nodiscard]] const std::string& text(int32_t id) const {
    return tokens[static_cast<size_t>(id)];
  }

  // Throws Error(kOutOfRange) naming `what` when `id` is not a token id of this vocabulary.
  void check_id(int64_t id, std::string_view what) const;

  // Special tokens (control, user-defined, unknown) by first byte, longest first; set by
  // build_index().
  [[nodiscard]] const std::vector<int32_t>& specials_starting_with(uint8_t byte) const {
    return specials_by_first_byte_[byte];
  }

 private:
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> index_;
  std::array<std::vector<int32_t>, 256> specials_by_first_byte_;
};

// A run of plain text, or one special token found in the input.
struct TextFragment {
  std::string_view text;  // empty for a token fragment
  int32_t token = -1;     // >= 0 for a special token
};

// Splits `text` at special tokens, longest match first at each position. User-defined tokens are
// always recognised; control and unknown-type tokens (<s>, <|im_start|>, <unk>) only when
// `parse_special` is set, as in llama.cpp.
[[nodiscard]] std::vector<TextFragment> split_special_tokens(const Vocab& vocab,
                                                             std::string_view text,
                                                             bool parse_special);

// The Tokenizer methods that depend only on the vocabulary.
class VocabTokenizer : public Tokenizer {
 public:
  explicit VocabTokenizer(Vocab vocab);

  [[nodiscard]] int32_t vocab_size() const override { return vocab_.size(); }
  [[nodiscard]] std::optional<int32_t> bos_id() const override { return vocab_.bos_id; }
  [[nodiscard]] std::optional<int32_t> eos_id() const override { return vocab_.eos_id; }
  [[nodiscard]] std::vector<int32_t> stop_ids() const override;
  [[nodiscard]] std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                                bool add_generation_prompt) const override;

  [[nodiscard]] const Vocab& vocab() const { return vocab_; }

 protected:
  // BOS / EOS around encoded ids, as the metadata and `options` ask.
  void add_bos_if_asked(const EncodeOptions& options, std::vector<int32_t>& ids) const;
  void add_eos_if_asked(const EncodeOptions& options, std::vector<int32_t>& ids) const;
  // Index of the first id decode() should render (skips the BOS that encode() would add).
  [[nodiscard]] size_t first_decoded_index(const std::vector<int32_t>& ids) const;

 private:
  Vocab vocab_;
  std::optional<ChatTemplate> chat_template_;
};

}  // namespace kvplan
