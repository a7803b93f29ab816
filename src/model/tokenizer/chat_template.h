// Chat templates recognised from a model's Jinja template text and rendered natively.
//
// kvplan does not run Jinja: it recognises the few template families its models use from marker
// strings in the template and renders them with fixed code.
//   ChatML   ("<|im_start|>")       <|im_start|>{role}\n{content}<|im_end|>\n ...
//            generation prompt      <|im_start|>assistant\n
//            A literal default system message that the template emits when the first message is
//            not a system message (SmolLM2, Qwen2) is extracted and emitted the same way.
//   Llama 3  ("<|start_header_id|>")
//   <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//            generation prompt      <|start_header_id|>assistant<|end_header_id|>\n\n
//   Llama 2  ("[INST]")             [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]
//   {assistant} </s>
//                                   <s>[INST] {user} [/INST] ...
//   Gemma    ("<start_of_turn>")    <start_of_turn>{user|model}\n{content}<end_of_turn>\n
//            generation prompt      <start_of_turn>model\n
//            A system message has no turn: its text and a blank line open the first turn.
// The rendered text never starts with BOS: the templates' leading `bos_token` is left to
// encode(), which adds it when the model's metadata asks for it (as llama.cpp does). Render the
// result with EncodeOptions::parse_special so the markers become their token ids.
//
//   auto tmpl = kvplan::ChatTemplate::detect(text, {.bos = "<s>", .eos = "</s>"});
//   std::string prompt = tmpl->render({{"user", "Hi"}}, /*add_generation_prompt=*/true);
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace kvplan {

enum class ChatTemplateStyle { kChatMl, kLlama3, kLlama2, kGemma };

struct ChatTemplateTokens {
  std::string bos;  // text of the BOS token (Llama 2 writes it between turns)
  std::string eos;  // text of the EOS token (Llama 2 ends assistant turns with it)
};

class ChatTemplate {
 public:
  // nullopt when the template text matches none of the known families.
  [[nodiscard]] static std::optional<ChatTemplate> detect(std::string_view template_text,
                                                          const ChatTemplateTokens& tokens);

  // Throws Error(kInvalidArgument) for a role the template family cannot express.
  [[nodiscard]] std::string render(const std::vector<ChatMessage>& messages,
                                   bool add_generation_prompt) const;

  [[nodiscard]] ChatTemplateStyle style() const { return style_; }
  [[nodiscard]] const std::string& default_system() const { return default_system_; }

 private:
  ChatTemplateStyle style_ = ChatTemplateStyle::kChatMl;
  ChatTemplateTokens tokens_;
  std::string default_system_;     // ChatML: emitted when messages[0] is not "system"
  bool llama2_has_system_ = true;  // Llama 2: the template knows <<SYS>>
  bool trim_content_ = false;      // the template strips message content
};

// Token strings that end an assistant turn in the template families above and in common vocabs.
[[nodiscard]] const std::vector<std::string>& end_of_turn_token_texts();

}  // namespace kvplan
