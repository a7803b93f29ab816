#include "server/openai_request.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvplan::server {
namespace {

// The status and message of the ApiError `body` raises.
std::pair<int, std::string> refusal(const std::string& body, bool chat = false) {
  try {
    (void)parse_completion_request(body, chat);
  } catch (const ApiError& e) {
    return {e.status(), e.what()};
  }
  return {0, ""};
}

TEST(OpenAiRequest, ReadsACompletionRequest) {
  const CompletionRequest r = parse_completion_request(
      R"({"model": "m", "prompt": "Once", "max_tokens": 5, "temperature": 0, "top_p": 0.5,
          "seed": 9, "stop": ["\n", "END"], "stream": true,
          "stream_options": {"include_usage": true}, "ignore_eos": true})",
      false);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.temperature, 0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.seed, 9u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(OpenAiRequest, DefaultsAreOpenAis) {
  const CompletionRequest r = parse_completion_request(R"({"model": "m", "prompt": ["x"]})", false);
  EXPECT_EQ(r.prompt, "x");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.temperature, 1);
  EXPECT_EQ(r.top_p, 1);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.stream);
}

TEST(OpenAiRequest, TakesTokenIdsAsThePrompt) {
  const CompletionRequest r =
      parse_completion_request(R"({"model": "m", "prompt": [1, 2, 3]})", false);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": [1, -2]})").first, 400);
}

TEST(OpenAiRequest, ReadsChatMessagesWithTextParts) {
  const CompletionRequest r = parse_completion_request(
      R"({"model": "m", "max_completion_tokens": 7, "messages": [
          {"role": "developer", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}]})",
      true);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.max_tokens, 7);
}

TEST(OpenAiRequest, RefusesBadBodiesNamingTheField) {
  EXPECT_EQ(refusal("{\"model\": ").first, 400);
  EXPECT_NE(refusal("{\"model\": ").second.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(refusal("[]").second, "the body must be a JSON object");
  EXPECT_EQ(refusal(R"({"prompt": "x"})").second, "model: expected the model's name");
  EXPECT_EQ(refusal(R"({"model": "m"})").second, "prompt: required");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": ""})").second, "prompt: is empty");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "max_tokens": -1})").second,
            "max_tokens: -1: expected an integer >= 1");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "max_tokens": 2.5})").second,
            "max_tokens: expected an integer");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "temperature": 3})").second,
            "temperature: 3 is outside [0, 2]");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "top_p": 0})").second,
            "top_p: expected a value in (0, 1]");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "stop": ["a","b","c","d","e"]})").first, 400);
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "n": 2})").second,
            "n: only 1 choice is supported");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "logprobs": 3})").second,
            "logprobs: not supported");
  EXPECT_EQ(refusal(R"({"model": "m", "messages": []})", true).second,
            "messages: expected a non-empty array");
  EXPECT_EQ(
      refusal(R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})", true).second,
      "messages[0].role: 'tool': expected system, user or assistant");
}

TEST(OpenAiRequest, ErrorBodyIsOpenAisErrorObject) {
  const ApiError e(404, "model 'x' does not exist", "model", "model_not_found");
  const nlohmann::json j = nlohmann::json::parse(e.body());
  EXPECT_EQ(j["error"]["message"], "model 'x' does not exist");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  EXPECT_TRUE(nlohmann::json::parse(ApiError(400, "bad").body())["error"]["code"].is_null());
}

}  // namespace
}  // namespace kvplan::server
