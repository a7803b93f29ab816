// Byte-level BPE with ranked merges (GGUF tokenizer.ggml.model = "gpt2", HF tokenizer.json BPE).
//
// Encoding (Sennrich et al. 2016, "Neural Machine Translation of Rare Words with Subword Units";
// byte-level variant of GPT-2, Radford et al. 2019):
//   1. split the input at special tokens (split_special_tokens);
//   2. split each text run with the pre-tokenizer's regexes (pretokenizer_regex.h);
//   3. map each piece's bytes to GPT-2's printable characters (byte_unicode.h);
//   4. start from one symbol per byte and repeatedly apply the lowest-ranked merge among adjacent
//      pairs (leftmost on ties), with a priority queue of candidate pairs: O(n log n) per piece;
//      with `ignore_merges`, a piece that is itself a token is emitted whole (Llama 3).
// Decoding maps the characters of each token back to bytes; special tokens are written as text.
//
//   kvplan::BpeTokenizer tok(std::move(vocab), std::move(merges), {.pre_patterns = ...});
#pragma once

#include <array>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/tokenizer/pretokenizer_regex.h"
#include "model/tokenizer/vocab.h"

namespace kvplan {

struct BpeOptions {
  std::vector<std::string> pre_patterns;  // pre-tokenizer regexes, applied in order
  bool ignore_merges = false;             // emit a piece whole when it is a token
  bool add_prefix_space = false;          // HF ByteLevel add_prefix_space
};

// One merge rule: the two token strings (in GPT-2 character form) it joins.
struct BpeMerge {
  std::string left;
  std::string right;
};

class BpeTokenizer final : public VocabTokenizer {
 public:
  // Throws Error(kInvalidArgument) naming `merges_key` (e.g. "metadata 'tokenizer.ggml.merges'")
  // and the index of a merge whose parts or
  // result are not vocabulary tokens. Earlier merges rank higher; a repeated merge keeps its
  // first rank.
  BpeTokenizer(Vocab vocab, const std::vector<BpeMerge>& merges, const BpeOptions& options,
               std::string_view merges_key);

  [[nodiscard]] std::vector<int32_t> encode(std::string_view text,
                                            const EncodeOptions& options) const override;
  [[nodiscard]] std::string decode(const std::vector<int32_t>& ids) const override;
  [[nodiscard]] std::string token_text(int32_t id) const override;

 private:
  struct MergeResult {
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  BpeOptions options_;
  PreTokenizer pre_;
  std::unordered_map<uint64_t, MergeResult> merges_;
  std::array<int32_t, 256> byte_token_{};  // token of each byte's single character, or -1
};

}  // namespace kvplan
