#include "server/openai_request.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

namespace kvplan::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxStops = 4;  // as OpenAI's API

[[noreturn]] void bad(const std::string& param, const std::string& what) {
  throw ApiError(400, fmt::format("{}: {}", param, what), param);
}

const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) bad(name, "expected a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) bad(name, fmt::format("{} is outside [{}, {}]", x, lo, hi));
  return x;
}

bool boolean(const json& body, const char* name) {
  const json* v = field(body, name);
  if (v == nullptr) return false;
  if (!v->is_boolean()) bad(name, "expected true or false");
  return v->get<bool>();
}

std::optional<int64_t> integer(const json& body, const char* name) {
  const json* v = field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) bad(name, "expected an integer");
  return v->get<int64_t>();
}

std::string text_content(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  // [{"type": "text", "text": "..."}, ...]: the text parts, in order.
  if (!content.is_array()) bad(param, "expected a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      bad(param, "only parts {\"type\": \"text\", \"text\": ...} are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

void read_prompt(const json& body, CompletionRequest& r) {
  const json* p = field(body, "prompt");
  if (p == nullptr) bad("prompt", "required");
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    for (const json& id : *p) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        bad("prompt", "token ids must be non-negative integers");
      }
      r.prompt_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  } else {
    bad("prompt", "expected a string, one string in an array, or an array of token ids");
  }
  if (r.prompt.empty() && r.prompt_ids.empty()) bad("prompt", "is empty");
}

void read_messages(const json& body, CompletionRequest& r) {
  const json* m = field(body, "messages");
  if (m == nullptr) bad("messages", "required");
  if (!m->is_array() || m->empty()) bad("messages", "expected a non-empty array");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!msg.is_object()) bad(param, "expected an object");
    const json* role = field(msg, "role");
    if (role == nullptr || !role->is_string()) bad(param + ".role", "expected a string");
    std::string name = role->get<std::string>();
    if (name == "developer") name = "system";  // OpenAI's newer name for the system role
    if (name != "system" && name != "user" && name != "assistant") {
      bad(param + ".role", fmt::format("'{}': expected system, user or assistant", name));
    }
    const json* content = field(msg, "content");
    if (content == nullptr) bad(param + ".content", "required");
    r.messages.push_back({name, text_content(*content, param + ".content")});
  }
}

void refuse_unsupported(const json& body) {
  if (const auto n = integer(body, "n"); n && *n != 1) bad("n", "only 1 choice is supported");
  if (const auto n = integer(body, "best_of"); n && *n != 1) bad("best_of", "not supported");
  for (const char* name : {"echo", "logprobs"}) {
    const json* v = field(body, name);
    if (v != nullptr && !(v->is_boolean() && !v->get<bool>())) bad(name, "not supported");
  }
  for (const char* name : {"suffix", "tools", "functions", "top_logprobs"}) {
    if (field(body, name) != nullptr) bad(name, "not supported");
  }
}

}  // namespace

std::string ApiError::body() const {
  const nlohmann::ordered_json error{{"error",
                                      {{"message", what()},
                                       {"type", type_},
                                       {"param", param_.empty() ? nlohmann::ordered_json(nullptr)
                                                                : nlohmann::ordered_json(param_)},
                                       {"code", code_.empty() ? nlohmann::ordered_json(nullptr)
                                                              : nlohmann::ordered_json(code_)}}}};
  return error.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

CompletionRequest parse_completion_request(const std::string& text, bool chat) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ApiError(400, fmt::format("the body is not valid JSON ({})", e.what()));
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  const json* model = field(body, "model");
  if (model == nullptr || !model->is_string()) bad("model", "expected the model's name");
  r.model = model->get<std::string>();
  if (chat)
    read_messages(body, r);
  else
    read_prompt(body, r);
  refuse_unsupported(body);
  r.max_tokens = integer(body, chat && field(body, "max_completion_tokens") != nullptr
                                   ? "max_completion_tokens"
                                   : "max_tokens");
  if (r.max_tokens && *r.max_tokens < 1) {
    bad(chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens",
        fmt::format("{}: expected an integer >= 1", *r.max_tokens));
  }
  r.temperature = number(body, "temperature", 1.0, 0.0, 2.0);
  r.top_p = number(body, "top_p", 1.0, 0.0, 1.0);
  if (r.top_p <= 0) bad("top_p", "expected a value in (0, 1]");
  if (const auto seed = integer(body, "seed")) r.seed = static_cast<uint64_t>(*seed);
  if (const json* stop = field(body, "stop")) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= kMaxStops) {
      for (const json& s : *stop) {
        if (!s.is_string()) bad("stop", "expected strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      bad("stop", fmt::format("expected a string or an array of at most {} strings", kMaxStops));
    }
  }
  r.stream = boolean(body, "stream");
  r.ignore_eos = boolean(body, "ignore_eos");
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "expected an object");
    r.include_usage = boolean(*options, "include_usage");
  }
  return r;
}

}  // namespace kvplan::server
