// Calibration prompts for the sensitivity profiler: loading, chat-template rendering, tokenization,
// truncation and the hash written into profile.json.
//
// Accepted files:
//   *.jsonl (or any file whose first non-blank character is '{'): one JSON object per line with
//     {"text": "..."}                         plain text, tokenized with BOS;
//     {"messages": [{"role","content"}...]}   rendered with the model's chat template;
//     {"tokens": [1, 2, ...]}                 token ids used as given (checked against the vocab).
//   anything else: plain text, prompts separated by one or more blank lines.
//
//   kvplan::CalibrationSet set = kvplan::load_calibration(path, tokenizer, config,
//   {.max_tokens=128}); set.prompts[0];  set.n_tokens;  kvplan::hash_hex(set.hash);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/tokenizer/tokenizer.h"

namespace kvplan {

// One prompt as written in the file, before tokenization.
struct CalibrationItem {
  enum class Kind { kText, kMessages, kTokens };
  Kind kind = Kind::kText;
  std::string text;
  std::vector<ChatMessage> messages;
  std::vector<int32_t> tokens;
  int line = 0;  // 1-based line (JSONL) or first line of the paragraph (text)
};

struct CalibrationOptions {
  int max_tokens = 128;  // per prompt, BOS included; longer prompts are cut (with a warning)
  int num_prompts = 0;   // use the first N prompts of the file; 0 = all
  // Long prompts become consecutive windows of max_tokens instead of being cut: every token of a
  // long sample is used (each window starts with BOS when the sample did, as llama-perplexity's
  // chunks do). A last window shorter than kMinWindowTokens is dropped.
  bool chunk = false;
  int max_windows = 0;  // with chunk: at most this many windows per sample (0 = all)
};

inline constexpr int kMinWindowTokens = 16;

struct CalibrationSet {
  std::string source;  // the file name as given
  std::vector<std::vector<int32_t>> prompts;
  int64_t n_tokens = 0;
  int n_truncated = 0;         // prompts cut to the token limit
  int n_samples = 0;           // items of the file used (with chunking, prompts >= samples)
  std::vector<int> sample_of;  // [prompt] index of the file item it came from
  int limit = 0;               // the token limit applied: min(max_tokens, context length)
  bool chat_fallback = false;  // messages rendered as "role: content" (no chat template)
  uint64_t hash = 0;           // of every prompt's token ids (length-prefixed), in order
};

// Parses a calibration file. Throws Error(kNotFound) for a missing file and kInvalidArgument,
// naming the file and line, for an empty file, malformed JSON or a line with none of the fields.
std::vector<CalibrationItem> read_calibration_file(const std::filesystem::path& path);
std::vector<CalibrationItem> parse_calibration_text(const std::string& text,
                                                    const std::string& source, bool jsonl);

// Renders and tokenizes items. Prompts longer than min(max_tokens, config.context_length) are
// truncated (one warning with the count); token ids outside the vocabulary are refused naming the
// line. Throws Error(kInvalidArgument) for max_tokens < 2 or num_prompts < 0.
CalibrationSet tokenize_calibration(const std::vector<CalibrationItem>& items,
                                    const std::string& source, const Tokenizer& tokenizer,
                                    const ModelConfig& config, const CalibrationOptions& options);

CalibrationSet load_calibration(const std::filesystem::path& path, const Tokenizer& tokenizer,
                                const ModelConfig& config, const CalibrationOptions& options);

// The hash of a list of token sequences, as stored in CalibrationSet::hash.
uint64_t calibration_hash(const std::vector<std::vector<int32_t>>& prompts);

}  // namespace kvplan
