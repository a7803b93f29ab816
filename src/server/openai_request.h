// The bodies of OpenAI's /v1/completions and /v1/chat/completions as kvplan serves them, read
// into typed requests, and the API's error object. Every field kvplan cannot honour is refused
// with the field's name rather than ignored (n > 1, logprobs, echo, best_of, suffix, tools).
//
//   CompletionRequest r = parse_completion_request(body_text, /*chat=*/true);   // or ApiError
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace kvplan::server {

// An error the client caused (4xx) or the server's state (503): OpenAI's error object.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : std::runtime_error(message),
        status_(status),
        param_(std::move(param)),
        code_(std::move(code)),
        type_(std::move(type)) {}
  [[nodiscard]] int status() const { return status_; }
  // {"error": {"message", "type", "param", "code"}}
  [[nodiscard]] std::string body() const;

 private:
  int status_;
  std::string param_, code_, type_;
};

struct CompletionRequest {
  bool chat = false;
  std::string model;
  std::string prompt;                 // /v1/completions: text
  std::vector<int32_t> prompt_ids;    // /v1/completions: token ids (prompt given as integers)
  std::vector<ChatMessage> messages;  // /v1/chat/completions
  std::optional<int64_t> max_tokens;  // absent: the server's default
  double temperature = 1;
  double top_p = 1;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // vLLM's extension: end-of-text tokens do not end the answer
};

// Throws ApiError(400) naming the field for malformed JSON, a missing or mistyped field, or a
// value out of range.
CompletionRequest parse_completion_request(const std::string& body, bool chat);

}  // namespace kvplan::server
