#include "server/openai_server.h"

#include <chrono>
#include <ctime>

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/error.h"
#include "server/completion_text.h"
#include "server/openai_request.h"
#include "server/prometheus_metrics.h"

namespace kvplan::server {
namespace {

using nlohmann::ordered_json;
using serve::FinishReason;
using serve::GenerationStream;

constexpr auto kKeepAlive = std::chrono::seconds(1);  // SSE comment while no token comes
constexpr int64_t kCompletionsDefaultMaxTokens = 16;  // OpenAI's default for /v1/completions

std::string dump(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

const char* finish_name(FinishReason f) {
  switch (f) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    default:
      return "error";
  }
}

struct Followed {
  std::string finish_reason;  // "length", "stop", "error" (the engine failed), "gone"
  GenerationStream::Snapshot snapshot;
};

// Reads a generation's tokens as text until it ends, a stop string appears, or the client is
// gone. `send(piece)` gets each piece of safe text and returns false once the client is gone;
// `idle()` runs when no token came for a while and returns false likewise.
template <class Send, class Idle>
Followed follow(GenerationStream& stream, CompletionText& text, const Tokenizer& tokenizer,
                Send send, Idle idle) {
  size_t seen = 0;
  for (;;) {
    GenerationStream::Snapshot snap = stream.wait(seen, kKeepAlive);
    if (snap.tokens.size() == seen && snap.finish == FinishReason::kNone) {
      if (!idle()) {
        stream.cancel();
        return {"gone", std::move(snap)};
      }
      continue;
    }
    // One piece per token, as OpenAI's streams send them (clients time tokens by their chunks).
    while (seen < snap.tokens.size()) {
      const std::string piece = text.append(tokenizer.token_text(snap.tokens[seen++]));
      if (text.stopped()) {
        stream.cancel();  // the rest is not wanted: free the sequence now
        snap.tokens.resize(seen);
        if (!piece.empty()) send(piece);
        return {"stop", std::move(snap)};
      }
      if (!piece.empty() && !send(piece)) {
        stream.cancel();
        return {"gone", std::move(snap)};
      }
    }
    if (snap.finish != FinishReason::kNone) {
      const std::string rest = text.finish();
      if (!rest.empty() && !send(rest)) return {"gone", std::move(snap)};
      return {finish_name(snap.finish), std::move(snap)};
    }
  }
}

ordered_json usage(const GenerationStream::Snapshot& s) {
  const auto completion = static_cast<int64_t>(s.tokens.size());
  return {{"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", s.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", s.restored_tokens}}}};
}

}  // namespace

OpenAiServer::OpenAiServer(serve::Engine& engine, const Tokenizer& tokenizer,
                           const ModelConfig& config, ServerOptions options)
    : engine_(engine),
      tokenizer_(tokenizer),
      config_(config),
      options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  route();
}

OpenAiServer::~OpenAiServer() = default;

void OpenAiServer::count(int status) {
  std::lock_guard lock(counts_mutex_);
  ++responses_by_status_[status];
}

int OpenAiServer::bind(const std::string& host, int port) {
  const int bound =
      port == 0 ? http_->bind_to_any_port(host) : (http_->bind_to_port(host, port) ? port : -1);
  if (bound < 0)
    fail(ErrorCode::kIo, "{}:{}: cannot listen there (in use, or no such address)", host, port);
  return bound;
}

bool OpenAiServer::listen() {
  return http_->listen_after_bind();
}

void OpenAiServer::drain() {
  draining_ = true;
  engine_.drain();
  http_->stop();
}

void OpenAiServer::route() {
  httplib::Server& s = *http_;
  const int threads = options_.http_threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_logger(
      [this](const httplib::Request&, const httplib::Response& res) { count(res.status); });
  // Statuses the library sets itself (no route, body too large) get the API's error object too.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = fmt::format("HTTP {}", res.status);
        if (res.status == 404) message = fmt::format("no route {} {}", req.method, req.path);
        if (res.status == 413) {
          message = fmt::format("the body is larger than {} bytes", options_.max_body_bytes);
        }
        res.set_content(ApiError(res.status, message).body(), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                             std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("serve: {}", what);
    send_json(res, 500, ApiError(500, "internal error: " + what, {}, {}, "server_error").body());
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, false);
  });
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const ordered_json model{{"id", options_.model_name},
                             {"object", "model"},
                             {"created", created_},
                             {"owned_by", "kvplan"}};
    send_json(res, 200, dump({{"object", "list"}, {"data", ordered_json::array({model})}}));
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool up = !draining_;
    send_json(res, up ? 200 : 503, dump({{"status", up ? "ok" : "draining"}}));
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::map<int, uint64_t> statuses;
    {
      std::lock_guard lock(counts_mutex_);
      statuses = responses_by_status_;
    }
    res.set_content(prometheus_metrics(engine_.counters(), statuses),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
}

void OpenAiServer::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  std::shared_ptr<GenerationStream> stream;
  CompletionRequest r;
  uint64_t number = 0;
  try {
    if (draining_) throw ApiError(503, "the server is shutting down", {}, {}, "server_error");
    r = parse_completion_request(req.body, chat);
    if (r.model != options_.model_name) {
      throw ApiError(404,
                     fmt::format("model '{}' does not exist; this server serves '{}'", r.model,
                                 options_.model_name),
                     "model", "model_not_found");
    }
    std::vector<int32_t> ids = r.prompt_ids;
    try {
      if (chat) {
        const std::string text = tokenizer_.apply_chat_template(r.messages, true);
        ids = tokenizer_.encode(text, {.add_bos = true, .parse_special = true});
      } else if (ids.empty()) {
        ids = tokenizer_.encode(r.prompt, {.add_bos = true, .parse_special = false});
      }
    } catch (const Error& e) {
      throw ApiError(400, e.what(), chat ? "messages" : "prompt");
    }
    for (const int32_t id : ids) {
      if (id >= tokenizer_.vocab_size()) {
        throw ApiError(
            400,
            fmt::format("token id {} is outside the vocabulary of {}", id, tokenizer_.vocab_size()),
            "prompt");
      }
    }
    if (ids.empty()) throw ApiError(400, "the prompt has no tokens", chat ? "messages" : "prompt");
    const auto prompt = static_cast<int64_t>(ids.size());
    const int64_t context = config_.context_length;
    if (context > 0 && prompt >= context) {
      throw ApiError(
          400, fmt::format("the prompt is {} tokens; the model's context is {}", prompt, context),
          chat ? "messages" : "prompt", "context_length_exceeded");
    }
    int64_t max_tokens =
        r.max_tokens.value_or(chat ? options_.default_max_tokens : kCompletionsDefaultMaxTokens);
    if (context > 0 && prompt + max_tokens > context) {
      if (r.max_tokens) {
        throw ApiError(400,
                       fmt::format("{} prompt + {} max_tokens exceed the model's context of {}",
                                   prompt, max_tokens, context),
                       "max_tokens", "context_length_exceeded");
      }
      max_tokens = context - prompt;
    }
    number = next_id_++;
    serve::GenerationRequest g{
        std::move(ids),
        max_tokens,
        {.temperature = r.temperature, .top_p = r.top_p, .seed = r.seed.value_or(number)},
        tokenizer_.stop_ids()};
    try {
      stream = engine_.submit(std::move(g));
    } catch (const Error& e) {
      if (draining_) throw ApiError(503, "the server is shutting down", {}, {}, "server_error");
      throw ApiError(400, e.what(), "max_tokens", "kv_memory_exceeded");
    }
  } catch (const ApiError& e) {
    send_json(res, e.status(), e.body());
    return;
  }

  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", number);
  const auto created = static_cast<int64_t>(std::time(nullptr));
  const std::string object = chat ? "chat.completion" : "text_completion";
  auto text = std::make_shared<CompletionText>(r.stop);

  if (!r.stream) {
    std::string content;
    const Followed f = follow(
        *stream, *text, tokenizer_,
        [&](const std::string& piece) {
          content += piece;
          return true;
        },
        [] { return true; });
    if (f.finish_reason == "error") {
      send_json(res, 500,
                ApiError(500, "the generation failed; see the server's log", {}, {}, "server_error")
                    .body());
      return;
    }
    ordered_json choice{{"index", 0}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", content}};
    } else {
      choice["text"] = content;
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = f.finish_reason;
    send_json(res, 200,
              dump({{"id", id},
                    {"object", object},
                    {"created", created},
                    {"model", options_.model_name},
                    {"choices", ordered_json::array({choice})},
                    {"usage", usage(f.snapshot)}}));
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  const bool include_usage = r.include_usage;
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, stream, text, id, created, chat, include_usage](size_t, httplib::DataSink& sink) {
        const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
        const auto event = [&](const ordered_json& body) {
          const std::string line = "data: " + dump(body) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        const auto chunk = [&](const ordered_json& delta, const ordered_json& finish) {
          ordered_json choice{{"index", 0}};
          if (chat) {
            choice["delta"] = delta;
          } else {
            choice["text"] = delta.value("content", "");
          }
          choice["logprobs"] = nullptr;
          choice["finish_reason"] = finish;
          return event({{"id", id},
                        {"object", chunk_object},
                        {"created", created},
                        {"model", options_.model_name},
                        {"choices", ordered_json::array({choice})}});
        };
        if (chat && !chunk({{"role", "assistant"}, {"content", ""}}, nullptr)) {
          stream->cancel();
          return false;
        }
        const Followed f = follow(
            *stream, *text, tokenizer_,
            [&](const std::string& piece) {
              return chunk({{"content", piece}}, nullptr);
            },
            [&] {
              static constexpr char kComment[] = ": keep-alive\n\n";
              return sink.write(kComment, sizeof(kComment) - 1);
            });
        if (f.finish_reason == "gone") return false;
        if (f.finish_reason == "error") {
          event(ordered_json::parse(
              ApiError(500, "the generation failed; see the server's log", {}, {}, "server_error")
                  .body()));
        } else if (!chunk(ordered_json::object(), f.finish_reason)) {
          return false;
        }
        if (include_usage) {
          event({{"id", id},
                 {"object", chunk_object},
                 {"created", created},
                 {"model", options_.model_name},
                 {"choices", ordered_json::array()},
                 {"usage", usage(f.snapshot)}});
        }
        static constexpr char kDone[] = "data: [DONE]\n\n";
        sink.write(kDone, sizeof(kDone) - 1);
        sink.done();
        return true;
      },
      [stream](bool) { stream->cancel(); });  // a stream that ended is unaffected
}

}  // namespace kvplan::server
