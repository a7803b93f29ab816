// Pre-tokenizer: splits text into the pieces that byte-level BPE encodes one at a time.
//
// A pre-tokenizer is an ordered list of Unicode-aware regular expressions (PCRE2 with UTF and UCP,
// so \p{L}, \p{N} and \s follow Unicode properties). The first pattern splits the whole text; each
// later pattern splits every piece of the previous stage. Within a stage, both the matches and the
// unmatched text between them become pieces (HF tokenizers' "Isolated" split behaviour, llama.cpp's
// regex splitter), so concatenating the pieces always gives back the input. Invalid UTF-8 never
// matches and ends up in pieces of its own.
//
//   kvplan::PreTokenizer pre(*kvplan::pretokenizer_patterns("llama3"));
//   std::vector<std::string_view> words = pre.split("Hello world!");  // "Hello", " world", "!"
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvplan {

// One compiled pattern. Thread-safe: split() may be called concurrently.
class SplitRegex {
 public:
  // Throws Error(kInvalidArgument) naming the pattern and PCRE2's message when it does not compile.
  explicit SplitRegex(const std::string& pattern);
  ~SplitRegex();
  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Appends the pieces of `text` (matches and the gaps between them, in order) to `out`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  [[nodiscard]] const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;  // no patterns: the whole text is one piece
  explicit PreTokenizer(const std::vector<std::string>& patterns);

  [[nodiscard]] std::vector<std::string_view> split(std::string_view text) const;
  [[nodiscard]] bool empty() const { return stages_.empty(); }

 private:
  std::vector<SplitRegex> stages_;
};

// The GPT-2 / HF ByteLevel(use_regex=true) pattern.
extern const char* const kGpt2SplitPattern;

// The pattern list for a GGUF `tokenizer.ggml.pre` value ("default", "gpt2", "llama3",
// "llama-bpe", "qwen2", "smollm", "starcoder", "refact", "gpt-4o"); nullopt when unknown.
[[nodiscard]] std::optional<std::vector<std::string>> pretokenizer_patterns(std::string_view name);

// The names pretokenizer_patterns() knows, for error messages.
[[nodiscard]] std::string known_pretokenizer_names();

}  // namespace kvplan
