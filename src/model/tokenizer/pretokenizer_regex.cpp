#include "model/tokenizer/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <utility>

#include "core/error.h"
#include "model/tokenizer/utf8.h"

namespace kvplan {
namespace {

// Patterns as published by the model authors (GPT-2's encoder.py, Meta's Llama 3 tokenizer,
// Qwen2's tokenizer.json, OpenAI's o200k_base) and as llama.cpp groups them by
// `tokenizer.ggml.pre`.
constexpr const char* kLlama3Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// StarCoder-family vocabularies (StarCoder, Refact, SmolLM): every digit is its own piece, then
// the GPT-2 pattern (HF: Sequence[Digits(individual_digits), ByteLevel]).
constexpr const char* kSingleDigitPattern = R"(\p{N})";

struct NamedPreTokenizer {
  const char* name;
  std::array<const char*, 2> patterns;
};

}  // namespace

const char* const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

const std::array<NamedPreTokenizer, 9>& named_pretokenizers() {
  static const std::array<NamedPreTokenizer, 9> table = {{
      {"default", {kGpt2SplitPattern, nullptr}},
      {"gpt2", {kGpt2SplitPattern, nullptr}},
      {"llama3", {kLlama3Pattern, nullptr}},
      {"llama-bpe", {kLlama3Pattern, nullptr}},
      {"qwen2", {kQwen2Pattern, nullptr}},
      {"smollm", {kSingleDigitPattern, kGpt2SplitPattern}},
      {"starcoder", {kSingleDigitPattern, kGpt2SplitPattern}},
      {"refact", {kSingleDigitPattern, kGpt2SplitPattern}},
      {"gpt-4o", {kGpt4oPattern, nullptr}},
  }};
  return table;
}

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  const int n = pcre2_get_error_message(code, buffer.data(), buffer.size());
  if (n < 0) return "PCRE2 error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buffer.data()), static_cast<size_t>(n));
}

}  // namespace

struct SplitRegex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex(const std::string& pattern) : pattern_(pattern), impl_(new Impl) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                              &error_offset, nullptr);
  if (impl_->code == nullptr) {
    fail(ErrorCode::kInvalidArgument, "pre-tokenizer regex '{}' does not compile at offset {}: {}",
         pattern, error_offset, pcre2_message(error_code));
  }
  // JIT is an optimisation only; the interpreter gives the same matches where it is unavailable.
  (void)pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

SplitRegex::~SplitRegex() = default;
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;

void SplitRegex::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (match == nullptr) fail(ErrorCode::kResourceExhausted, "pre-tokenizer: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, match, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(match);
      // A pattern that backtracks past PCRE2's limits is a property of the tokenizer file (bad
      // input); any other failure is ours.
      const bool limit = rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
                         rc == PCRE2_ERROR_HEAPLIMIT;
      fail(limit ? ErrorCode::kInvalidArgument : ErrorCode::kInternal,
           "pre-tokenizer regex '{}' failed at byte {}: {}", pattern_, pos, pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (end == begin) {  // an empty match carries no text; step over one character
      pos = begin + utf8_char_length(text, begin);
      continue;
    }
    if (begin > gap_start) out.push_back(text.substr(gap_start, begin - gap_start));
    out.push_back(text.substr(begin, end - begin));
    gap_start = pos = end;
  }
  pcre2_match_data_free(match);
  if (gap_start < text.size()) out.push_back(text.substr(gap_start));
}

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns) {
  stages_.reserve(patterns.size());
  for (const std::string& p : patterns) stages_.emplace_back(p);
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const SplitRegex& stage : stages_) {
    next.clear();
    for (std::string_view piece : pieces) stage.split(piece, next);
    pieces.swap(next);
  }
  return pieces;
}

std::optional<std::vector<std::string>> pretokenizer_patterns(std::string_view name) {
  for (const NamedPreTokenizer& entry : named_pretokenizers()) {
    if (name != entry.name) continue;
    std::vector<std::string> patterns;
    for (const char* p : entry.patterns) {
      if (p != nullptr) patterns.emplace_back(p);
    }
    return patterns;
  }
  return std::nullopt;
}

std::string known_pretokenizer_names() {
  std::string names;
  for (const NamedPreTokenizer& entry : named_pretokenizers()) {
    if (!names.empty()) names += ", ";
    names += entry.name;
  }
  return names;
}

}  // namespace kvplan
