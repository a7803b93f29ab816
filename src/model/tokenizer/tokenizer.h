// Tokenizer: text <-> token ids for the models kvplan loads.
//
// Implementations: GGUF "llama" (SentencePiece BPE with scores and byte fallback), GGUF "gpt2"
// (byte-level BPE with merges and the pre-tokenizer named by tokenizer.ggml.pre, via PCRE2), and
// HF tokenizer.json (BPE). BOS/EOS handling and the chat template follow the model's metadata.
//
//   std::unique_ptr<kvplan::Tokenizer> tok = kvplan::Tokenizer::from_gguf(gguf);
//   std::vector<int32_t> ids = tok->encode("Once upon a time", {.add_bos = true});
//   std::string text = tok->decode(ids);
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvplan {

class GgufFile;

struct EncodeOptions {
  bool add_bos = true;        // prepend BOS when the model's metadata says to (and it has one)
  bool parse_special = false;  // recognise special/control tokens written in the text
};

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);
  // tokenizer.json (and tokenizer_config.json beside it, if present, for BOS/EOS/chat template).
  static std::unique_ptr<Tokenizer> from_hf_json(const std::filesystem::path& tokenizer_json);
  // The same from text already in memory; `config_text` is tokenizer_config.json's (empty: none).
  // `source` names tokenizer.json in errors.
  static std::unique_ptr<Tokenizer> from_hf_json_text(std::string_view tokenizer_text,
                                                      std::string_view config_text,
                                                      const std::string& source);

  [[nodiscard]] virtual std::vector<int32_t> encode(std::string_view text,
                                                    const EncodeOptions& options = {}) const = 0;
  [[nodiscard]] virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The text one token contributes (for streaming generation).
  [[nodiscard]] virtual std::string token_text(int32_t id) const = 0;

  [[nodiscard]] virtual int32_t vocab_size() const = 0;
  [[nodiscard]] virtual std::optional<int32_t> bos_id() const = 0;
  [[nodiscard]] virtual std::optional<int32_t> eos_id() const = 0;
  // Token ids that end generation (EOS, end-of-turn such as <|im_end|>).
  [[nodiscard]] virtual std::vector<int32_t> stop_ids() const = 0;

  // Renders messages with the model's chat template (ChatML, Llama 2/3, ... recognised from the
  // template text) and the assistant prefix when `add_generation_prompt`. Throws
  // Error(kUnimplemented) when the model has no template kvplan recognises.
  [[nodiscard]] virtual std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                                        bool add_generation_prompt) const = 0;
};

}  // namespace kvplan
