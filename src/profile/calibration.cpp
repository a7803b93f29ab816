#include "profile/calibration.h"

#include <algorithm>
#include <optional>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "core/hash.h"

namespace kvplan {
namespace {

bool looks_like_jsonl(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

CalibrationItem parse_json_line(const std::string& line, const std::string& source, int line_no) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    fail(ErrorCode::kInvalidArgument, "{}:{}: not a JSON object", source, line_no);
  }
  CalibrationItem item;
  item.line = line_no;
  if (j.contains("text")) {
    if (!j["text"].is_string()) {
      fail(ErrorCode::kInvalidArgument, "{}:{}: field 'text' must be a string", source, line_no);
    }
    item.kind = CalibrationItem::Kind::kText;
    item.text = j["text"].get<std::string>();
    if (item.text.empty()) {
      fail(ErrorCode::kInvalidArgument, "{}:{}: field 'text' is empty", source, line_no);
    }
  } else if (j.contains("messages")) {
    const nlohmann::json& m = j["messages"];
    if (!m.is_array() || m.empty()) {
      fail(ErrorCode::kInvalidArgument, "{}:{}: field 'messages' must be a non-empty array", source,
           line_no);
    }
    item.kind = CalibrationItem::Kind::kMessages;
    for (size_t i = 0; i < m.size(); ++i) {
      if (!m[i].is_object() || !m[i].contains("role") || !m[i]["role"].is_string() ||
          !m[i].contains("content") || !m[i]["content"].is_string()) {
        fail(ErrorCode::kInvalidArgument,
             "{}:{}: messages[{}] needs string fields 'role' and 'content'", source, line_no, i);
      }
      item.messages.push_back(
          {m[i]["role"].get<std::string>(), m[i]["content"].get<std::string>()});
    }
  } else if (j.contains("tokens")) {
    const nlohmann::json& t = j["tokens"];
    if (!t.is_array() || t.empty()) {
      fail(ErrorCode::kInvalidArgument, "{}:{}: field 'tokens' must be a non-empty array", source,
           line_no);
    }
    item.kind = CalibrationItem::Kind::kTokens;
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_number_integer()) {
        fail(ErrorCode::kInvalidArgument, "{}:{}: tokens[{}] is not an integer", source, line_no,
             i);
      }
      const int64_t id = t[i].get<int64_t>();
      if (id < 0 || id > INT32_MAX) {
        fail(ErrorCode::kInvalidArgument, "{}:{}: tokens[{}] = {} is not a token id", source,
             line_no, i, id);
      }
      item.tokens.push_back(static_cast<int32_t>(id));
    }
  } else {
    fail(ErrorCode::kInvalidArgument, "{}:{}: expected a field 'text', 'messages' or 'tokens'",
         source, line_no);
  }
  return item;
}

}  // namespace

std::vector<CalibrationItem> parse_calibration_text(const std::string& text,
                                                    const std::string& source, bool jsonl) {
  std::vector<CalibrationItem> items;
  size_t start = 0;
  int line_no = 0;
  CalibrationItem paragraph;
  auto flush = [&] {
    while (!paragraph.text.empty() && paragraph.text.back() == '\n') paragraph.text.pop_back();
    if (!paragraph.text.empty()) items.push_back(std::move(paragraph));
    paragraph = {};
  };
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const bool blank = line.find_first_not_of(" \t") == std::string::npos;
    if (jsonl) {
      if (!blank) items.push_back(parse_json_line(line, source, line_no));
      continue;
    }
    if (blank) {
      flush();
      continue;
    }
    if (paragraph.text.empty()) paragraph.line = line_no;
    paragraph.text += line;
    paragraph.text += '\n';
  }
  if (!jsonl) flush();
  if (items.empty()) {
    fail(ErrorCode::kInvalidArgument, "{}: no prompts (the file is empty)", source);
  }
  return items;
}

std::vector<CalibrationItem> read_calibration_file(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  return parse_calibration_text(text, path.string(), looks_like_jsonl(text));
}

uint64_t calibration_hash(const std::vector<std::vector<int32_t>>& prompts) {
  Hasher h;
  h.update("kvplan.calibration/v1");
  h.update_u64(prompts.size());
  for (const std::vector<int32_t>& p : prompts) {
    h.update_u64(p.size());
    for (const int32_t id : p) h.update_u64(static_cast<uint32_t>(id));
  }
  return h.digest();
}

CalibrationSet tokenize_calibration(const std::vector<CalibrationItem>& items,
                                    const std::string& source, const Tokenizer& tokenizer,
                                    const ModelConfig& config, const CalibrationOptions& options) {
  if (options.max_tokens < 2) {
    fail(ErrorCode::kInvalidArgument, "--max-tokens {}: expected at least 2", options.max_tokens);
  }
  if (options.num_prompts < 0) {
    fail(ErrorCode::kInvalidArgument, "--num-prompts {}: expected >= 0 (0 = all)",
         options.num_prompts);
  }
  CalibrationSet set;
  set.source = source;
  int64_t limit = options.max_tokens;
  if (config.context_length > 0) limit = std::min<int64_t>(limit, config.context_length);
  set.limit = static_cast<int>(limit);
  const size_t n = options.num_prompts > 0
                       ? std::min(items.size(), static_cast<size_t>(options.num_prompts))
                       : items.size();
  const int32_t vocab = config.vocab_size > 0 ? config.vocab_size : tokenizer.vocab_size();
  size_t longest = 0;
  for (size_t i = 0; i < n; ++i) {
    const CalibrationItem& item = items[i];
    std::vector<int32_t> ids;
    switch (item.kind) {
      case CalibrationItem::Kind::kText:
        ids = tokenizer.encode(item.text, {.add_bos = true});
        break;
      case CalibrationItem::Kind::kMessages: {
        std::string rendered;
        try {
          rendered = tokenizer.apply_chat_template(item.messages, false);
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kUnimplemented) throw;
          // A base model without a template still gets the dialogue's words.
          if (!set.chat_fallback) {
            spdlog::warn(
                "{}: the model has no chat template kvplan recognises; messages are "
                "rendered as 'role: content' lines",
                source);
          }
          set.chat_fallback = true;
          for (const ChatMessage& m : item.messages) rendered += m.role + ": " + m.content + "\n";
        }
        ids = tokenizer.encode(rendered, {.add_bos = true, .parse_special = !set.chat_fallback});
        break;
      }
      case CalibrationItem::Kind::kTokens:
        ids = item.tokens;
        for (size_t t = 0; t < ids.size(); ++t) {
          if (ids[t] >= vocab) {
            fail(ErrorCode::kInvalidArgument,
                 "{}:{}: tokens[{}] = {} is outside the model's vocabulary [0, {})", source,
                 item.line, t, ids[t], vocab);
          }
        }
        break;
    }
    if (ids.empty()) {
      fail(ErrorCode::kInvalidArgument, "{}:{}: the prompt has no tokens", source, item.line);
    }
    longest = std::max(longest, ids.size());
    ++set.n_samples;
    const auto add = [&](std::vector<int32_t> prompt) {
      set.n_tokens += static_cast<int64_t>(prompt.size());
      set.prompts.push_back(std::move(prompt));
      set.sample_of.push_back(static_cast<int>(i));
    };
    if (static_cast<int64_t>(ids.size()) <= limit) {
      add(std::move(ids));
    } else if (!options.chunk) {
      ids.resize(static_cast<size_t>(limit));
      ++set.n_truncated;
      add(std::move(ids));
    } else {
      const std::optional<int32_t> bos = tokenizer.bos_id();
      const bool leading_bos = bos && ids.front() == *bos;
      const size_t body = leading_bos ? 1 : 0;  // where the text's own tokens start
      const size_t per_window = static_cast<size_t>(limit) - body;
      int windows = 0;
      for (size_t start = body; start < ids.size(); start += per_window) {
        if (options.max_windows > 0 && windows++ == options.max_windows) break;
        const size_t end = std::min(ids.size(), start + per_window);
        if (start > body && end - start + body < static_cast<size_t>(kMinWindowTokens)) break;
        std::vector<int32_t> window;
        if (leading_bos) window.push_back(*bos);
        window.insert(window.end(), ids.begin() + static_cast<std::ptrdiff_t>(start),
                      ids.begin() + static_cast<std::ptrdiff_t>(end));
        add(std::move(window));
      }
    }
  }
  if (set.n_truncated > 0) {
    spdlog::warn(
        "{}: {} of {} prompts truncated to {} tokens (longest {}; limit = min(--max-tokens "
        "{}, model context {}))",
        source, set.n_truncated, n, limit, longest, options.max_tokens, config.context_length);
  }
  set.hash = calibration_hash(set.prompts);
  return set;
}

CalibrationSet load_calibration(const std::filesystem::path& path, const Tokenizer& tokenizer,
                                const ModelConfig& config, const CalibrationOptions& options) {
  return tokenize_calibration(read_calibration_file(path), path.string(), tokenizer, config,
                              options);
}

}  // namespace kvplan
