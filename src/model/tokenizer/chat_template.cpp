#include "model/tokenizer/chat_template.h"

#include <array>

#include "core/error.h"

namespace kvplan {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(kWhitespace);
  return s.substr(begin, end - begin + 1);
}

// Undoes the escapes a Jinja string literal may hold (\n, \t, \', \", \\).
std::string unescape_jinja_literal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      default:
        out.push_back(c);
        break;
    }
  }
  return out;
}

// The literal system message a ChatML template writes when the conversation has none, e.g.
// {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n...<|im_end|>\n'
// }}
std::string find_chatml_default_system(std::string_view tmpl) {
  size_t guard = tmpl.find("!= 'system'");
  if (guard == std::string_view::npos) guard = tmpl.find("!= \"system\"");
  if (guard == std::string_view::npos) return {};
  const size_t endif = tmpl.find("endif", guard);
  constexpr std::array<std::string_view, 2> kOpeners = {"<|im_start|>system\n",
                                                        "<|im_start|>system\\n"};
  for (std::string_view opener : kOpeners) {
    const size_t start = tmpl.find(opener, guard);
    if (start == std::string_view::npos || start > endif) continue;
    const size_t text_begin = start + opener.size();
    const size_t stop = tmpl.find("<|im_end|>", text_begin);
    if (stop == std::string_view::npos || stop > endif) continue;
    return unescape_jinja_literal(tmpl.substr(text_begin, stop - text_begin));
  }
  return {};
}

}  // namespace

std::optional<ChatTemplate> ChatTemplate::detect(std::string_view text,
                                                 const ChatTemplateTokens& tokens) {
  ChatTemplate t;
  t.tokens_ = tokens;
  if (text.find("<|im_start|>") != std::string_view::npos) {
    t.style_ = ChatTemplateStyle::kChatMl;
    t.default_system_ = find_chatml_default_system(text);
  } else if (text.find("<|start_header_id|>") != std::string_view::npos &&
             text.find("<|eot_id|>") != std::string_view::npos) {
    t.style_ = ChatTemplateStyle::kLlama3;
    t.trim_content_ = true;  // Meta's template writes message['content'] | trim
  } else if (text.find("<start_of_turn>") != std::string_view::npos) {
    t.style_ = ChatTemplateStyle::kGemma;
    t.trim_content_ = true;  // Google's template writes message['content'] | trim
  } else if (text.find("[INST]") != std::string_view::npos) {
    t.style_ = ChatTemplateStyle::kLlama2;
    t.llama2_has_system_ = text.find("<<SYS>>") != std::string_view::npos;
    t.trim_content_ = text.find(".strip()") != std::string_view::npos ||
                      text.find("| trim") != std::string_view::npos;
  } else {
    return std::nullopt;
  }
  return t;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt) const {
  std::string out;
  auto content_of = [&](const ChatMessage& m) {
    return trim_content_ ? std::string(trim(m.content)) : m.content;
  };
  switch (style_) {
    case ChatTemplateStyle::kChatMl:
      if (!messages.empty() && messages.front().role != "system" && !default_system_.empty()) {
        out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
      }
      for (const ChatMessage& m : messages) {
        out += "<|im_start|>" + m.role + "\n" + content_of(m) + "<|im_end|>\n";
      }
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatTemplateStyle::kLlama3:
      for (const ChatMessage& m : messages) {
        out +=
            "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + content_of(m) + "<|eot_id|>";
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplateStyle::kGemma: {
      std::string first_prefix;
      size_t first = 0;
      if (!messages.empty() && messages.front().role == "system") {
        first_prefix = messages.front().content + "\n\n";
        first = 1;
      }
      for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if ((m.role == "user") != ((i - first) % 2 == 0)) {
          fail(ErrorCode::kInvalidArgument,
               "Gemma chat template: roles must alternate user/assistant/user/... (message {} is "
               "'{}')",
               i, m.role);
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n" + (i == first ? first_prefix : std::string()) +
               content_of(m) + "<end_of_turn>\n";
      }
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      break;
    }
    case ChatTemplateStyle::kLlama2: {
      // A turn is "[INST] {user} [/INST] {assistant} </s>"; turns after the first open with BOS.
      bool turn_open = false;
      bool first_turn = true;
      std::string pending_system;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          pending_system = content_of(m);
          continue;
        }
        if (m.role == "user") {
          if (!first_turn) out += tokens_.bos;
          out += "[INST] ";
          if (!pending_system.empty()) {
            out += llama2_has_system_ ? "<<SYS>>\n" + pending_system + "\n<</SYS>>\n\n"
                                      : pending_system + "\n\n";
            pending_system.clear();
          }
          out += content_of(m) + " [/INST]";
          turn_open = true;
          first_turn = false;
        } else if (m.role == "assistant") {
          if (!turn_open) {
            fail(ErrorCode::kInvalidArgument,
                 "Llama 2 chat template: an assistant message must follow a user message");
          }
          out += " " + content_of(m) + " " + tokens_.eos;
          turn_open = false;
        } else {
          fail(ErrorCode::kInvalidArgument,
               "Llama 2 chat template: role '{}' is not supported (expected system, user or "
               "assistant)",
               m.role);
        }
      }
      break;
    }
  }
  return out;
}

const std::vector<std::string>& end_of_turn_token_texts() {
  static const std::vector<std::string> texts = {
      "<|im_end|>",    "<|eot_id|>",    "<|eom_id|>",      "<|end|>",
      "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>"};
  return texts;
}

}  // namespace kvplan
