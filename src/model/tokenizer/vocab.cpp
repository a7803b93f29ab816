#include "model/tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/error.h"

namespace kvplan {

void Vocab::build_index() {
  index_.clear();
  index_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) index_.emplace(tokens[i], static_cast<int32_t>(i));
  for (auto& ids : specials_by_first_byte_) ids.clear();
  for (int32_t id = 0; id < size(); ++id) {
    const TokenType t = type(id);
    const bool special =
        t == TokenType::kUserDefined || t == TokenType::kControl || t == TokenType::kUnknown;
    if (!special || text(id).empty()) continue;
    specials_by_first_byte_[static_cast<uint8_t>(text(id)[0])].push_back(id);
  }
  for (auto& ids : specials_by_first_byte_) {
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int32_t a, int32_t b) { return text(a).size() > text(b).size(); });
  }
}

std::optional<int32_t> Vocab::find(std::string_view text) const {
  const auto it = index_.find(text);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void Vocab::check_id(int64_t id, std::string_view what) const {
  if (id < 0 || id >= static_cast<int64_t>(tokens.size())) {
    fail(ErrorCode::kOutOfRange, "{}: {} is token id {}, expected 0..{}", source, what, id,
         static_cast<int64_t>(tokens.size()) - 1);
  }
}

std::vector<TextFragment> split_special_tokens(const Vocab& vocab, std::string_view text,
                                               bool parse_special) {
  std::vector<TextFragment> fragments;
  size_t text_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    int32_t matched = -1;
    for (int32_t id : vocab.specials_starting_with(static_cast<uint8_t>(text[pos]))) {
      if (!parse_special && vocab.type(id) != TokenType::kUserDefined) continue;
      if (text.substr(pos).starts_with(vocab.text(id))) {
        matched = id;
        break;
      }
    }
    if (matched < 0) {
      ++pos;
      continue;
    }
    if (pos > text_start) fragments.push_back({text.substr(text_start, pos - text_start), -1});
    fragments.push_back({{}, matched});
    pos += vocab.text(matched).size();
    text_start = pos;
  }
  if (text_start < text.size()) fragments.push_back({text.substr(text_start), -1});
  return fragments;
}

VocabTokenizer::VocabTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  if (!vocab_.chat_template.empty()) {
    ChatTemplateTokens tokens;
    if (vocab_.bos_id) tokens.bos = vocab_.text(*vocab_.bos_id);
    if (vocab_.eos_id) tokens.eos = vocab_.text(*vocab_.eos_id);
    chat_template_ = ChatTemplate::detect(vocab_.chat_template, tokens);
  }
}

std::vector<int32_t> VocabTokenizer::stop_ids() const {
  std::vector<int32_t> ids;
  auto add = [&](int32_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (vocab_.eos_id) add(*vocab_.eos_id);
  for (int32_t id : vocab_.extra_stop_ids) add(id);
  for (const std::string& text : end_of_turn_token_texts()) {
    const std::optional<int32_t> id = vocab_.find(text);
    if (!id) continue;
    const TokenType t = vocab_.type(*id);
    if (t == TokenType::kControl || t == TokenType::kUserDefined) add(*id);
  }
  return ids;
}

std::string VocabTokenizer::apply_chat_template(const std::vector<ChatMessage>& messages,
                                                bool add_generation_prompt) const {
  if (!chat_template_) {
    if (vocab_.chat_template.empty()) {
      fail(ErrorCode::kUnimplemented, "{}: the model has no chat template", vocab_.source);
    }
    fail(ErrorCode::kUnimplemented,
         "{}: chat template not recognised (kvplan knows ChatML, Llama 2 [INST] and Llama 3 "
         "header templates); template begins: {}",
         vocab_.source, vocab_.chat_template.substr(0, 80));
  }
  return chat_template_->render(messages, add_generation_prompt);
}

void VocabTokenizer::add_bos_if_asked(const EncodeOptions& options,
                                      std::vector<int32_t>& ids) const {
  if (options.add_bos && vocab_.add_bos && vocab_.bos_id) ids.push_back(*vocab_.bos_id);
}

// EncodeOptions has no separate EOS switch: `add_bos` means "add the special tokens the model's
// metadata asks for" (llama.cpp's add_special), which includes EOS when add_eos_token is true.
void VocabTokenizer::add_eos_if_asked(const EncodeOptions& options,
                                      std::vector<int32_t>& ids) const {
  if (options.add_bos && vocab_.add_eos && vocab_.eos_id) ids.push_back(*vocab_.eos_id);
}

size_t VocabTokenizer::first_decoded_index(const std::vector<int32_t>& ids) const {
  return (!ids.empty() && vocab_.add_bos && vocab_.bos_id && ids.front() == *vocab_.bos_id) ? 1 : 0;
}

}  // namespace kvplan
