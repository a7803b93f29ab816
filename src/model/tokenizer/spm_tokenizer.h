// SentencePiece-style BPE over a scored vocabulary (GGUF tokenizer.ggml.model = "llama").
//
// Encoding (as SentencePiece's BPE model and llama.cpp's llm_tokenizer_spm do it):
//   1. split the input at special tokens (split_special_tokens);
//   2. in each text run, prefix a space when the run starts the input or follows a special token
//      (`add_space_prefix`, default on), then replace every space by U+2581 "▁";
//   3. start from one symbol per UTF-8 character and repeatedly merge the adjacent pair whose
//      concatenation is a vocabulary token with the highest score (leftmost on ties), using a
//      priority queue of candidate pairs: O(n log n) for n characters;
//   4. emit each final symbol's id; a symbol that is not a token (an unseen character) falls back
//      to its bytes as <0xXX> byte tokens, or <unk> when the vocabulary has no byte tokens.
// Decoding maps "▁" back to a space and byte tokens to their byte, skips a leading BOS (when the
// metadata has encode() add one), writes other control tokens as their text, and drops the one
// space that step 2 added at the start (as llama.cpp's detokenizer does). Spaces that step 2 added
// after special tokens in the middle of the text are kept, so with parse_special such text does
// not round-trip exactly.
//
//   kvplan::SpmTokenizer tok(std::move(vocab), {.add_space_prefix = true});
#pragma once

#include <array>
#include <string>
#include <vector>

#include "model/tokenizer/vocab.h"

namespace kvplan {

struct SpmOptions {
  bool add_space_prefix = true;  // GGUF tokenizer.ggml.add_space_prefix
};

class SpmTokenizer final : public VocabTokenizer {
 public:
  // `vocab.scores` must hold one score per token (the caller validates the file).
  SpmTokenizer(Vocab vocab, const SpmOptions& options);

  [[nodiscard]] std::vector<int32_t> encode(std::string_view text,
                                            const EncodeOptions& options) const override;
  [[nodiscard]] std::string decode(const std::vector<int32_t>& ids) const override;
  [[nodiscard]] std::string token_text(int32_t id) const override;

 private:
  // Appends the ids of one text run, already escaped ("▁" for spaces).
  void encode_run(std::string_view escaped, std::vector<int32_t>& out) const;
  void emit_symbol(std::string_view symbol, std::vector<int32_t>& out) const;

  SpmOptions options_;
  std::array<int32_t, 256> byte_token_{};  // id of <0xXX>, or -1
};

}  // namespace kvplan
