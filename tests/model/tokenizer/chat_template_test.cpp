#include "model/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

const ChatTemplateTokens kTokens{.bos = "<s>", .eos = "</s>"};

// Template texts as the model cards publish them (shortened to their marker-bearing parts).
constexpr const char* kPlainChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kQwenLikeChatMl =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}";
constexpr const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
    "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = "
    "bos_token + content %}{% endif %}{{ content }}{% endfor %}";
constexpr const char* kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
    "messages[0]['content'] | trim + '\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in messages "
    "%}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'].strip() + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'].strip() + "
    "' ' + eos_token }}{% endif %}{% endfor %}";

constexpr const char* kGemma3 =
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = "
    "messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}"
    "{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}{%- if (message['role'] == 'assistant') -%}{%- set role "
    "= \"model\" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ "
    "'<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}{{ "
    "message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if "
    "add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}";

// What transformers renders from Gemma 3's template for these messages.
TEST(ChatTemplate, Gemma) {
  const auto t = ChatTemplate::detect(kGemma3, kTokens);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->style(), ChatTemplateStyle::kGemma);
  EXPECT_EQ(
      t->render(
          {{"system", "Be terse."}, {"user", " Hi "}, {"assistant", "Hello"}, {"user", "2+2?"}},
          true),
      "<start_of_turn>user\nBe terse.\n\nHi<end_of_turn>\n"
      "<start_of_turn>model\nHello<end_of_turn>\n"
      "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t->render({{"user", "Q"}}, false), "<start_of_turn>user\nQ<end_of_turn>\n");
  try {
    (void)t->render({{"user", "a"}, {"user", "b"}}, true);
    ADD_FAILURE() << "two user turns in a row were rendered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("alternate"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, ChatMl) {
  const auto t = ChatTemplate::detect(kPlainChatMl, kTokens);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->style(), ChatTemplateStyle::kChatMl);
  EXPECT_EQ(t->default_system(), "");
  EXPECT_EQ(t->render({{"user", "Hi there"}, {"assistant", " ok "}, {"user", "2+2?"}}, true),
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n ok <|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t->render({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, ChatMlDefaultSystemWithEscapedNewlines) {
  const auto t = ChatTemplate::detect(kQwenLikeChatMl, kTokens);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->default_system(), "You are a helpful assistant.");
  EXPECT_EQ(t->render({{"user", "Q"}}, false),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nQ<|im_end|>\n");
  EXPECT_EQ(t->render({{"system", "S"}, {"user", "Q"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n");
}

TEST(ChatTemplate, Llama3) {
  const auto t = ChatTemplate::detect(kLlama3, kTokens);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->style(), ChatTemplateStyle::kLlama3);
  EXPECT_EQ(t->render({{"system", "Be terse. "}, {"user", " Hi"}}, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama2) {
  const auto t = ChatTemplate::detect(kLlama2, kTokens);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->style(), ChatTemplateStyle::kLlama2);
  EXPECT_EQ(
      t->render({{"system", "Sys"}, {"user", "A?"}, {"assistant", "B."}, {"user", "C?"}}, true),
      "[INST] <<SYS>>\nSys\n<</SYS>>\n\nA? [/INST] B. </s><s>[INST] C? [/INST]");
  try {
    (void)t->render({{"tool", "x"}}, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("tool"), std::string::npos);
  }
}

TEST(ChatTemplate, UnknownTemplate) {
  EXPECT_FALSE(ChatTemplate::detect(
                   "{% for m in messages %}<|user|>\n{{ m.content }}<|end|>{% endfor %}", kTokens)
                   .has_value());
}

}  // namespace
}  // namespace kvplan
