// An OpenAI-compatible HTTP server over the serving engine (serve/engine.h), on cpp-httplib:
//   POST /v1/completions, /v1/chat/completions   (streaming SSE or one JSON answer)
//   GET  /v1/models, /health, /metrics            (Prometheus text)
// A bad request gets a 4xx JSON error with a one-line reason and the server goes on; a client that
// disconnects mid-stream cancels its generation (its sequence is freed at the next step); drain()
// answers 503 to new requests, lets the ones in flight finish, and stops the listener.
//
//   OpenAiServer server(engine, tokenizer, config, {.model_name = "SmolLM2"});
//   int port = server.bind("127.0.0.1", 0);
//   server.listen();            // returns after drain()
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "model/model_config.h"
#include "model/tokenizer/tokenizer.h"
#include "serve/engine.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace kvplan::server {

struct ServerOptions {
  std::string model_name;            // the id clients name in "model"
  int64_t default_max_tokens = 256;  // when a request names none (OpenAI's completions use 16)
  size_t max_body_bytes = 1 << 20;   // a larger body gets 413
  int http_threads = 64;             // connections served at once
};

class OpenAiServer {
 public:
  OpenAiServer(serve::Engine& engine, const Tokenizer& tokenizer, const ModelConfig& config,
               ServerOptions options);
  ~OpenAiServer();

  // Binds the listening socket; port 0 picks a free one. Returns the port. Throws Error(kIo).
  int bind(const std::string& host, int port);
  // Serves until drain() has run. Returns false if the listener failed.
  bool listen();
  // New requests get 503; waits for the engine to finish what it holds; stops the listener.
  void drain();

 private:
  void route();
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void count(int status);

  serve::Engine& engine_;
  const Tokenizer& tokenizer_;
  ModelConfig config_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};
  int64_t created_ = 0;  // unix time the server started ("created" of the model object)
  std::mutex counts_mutex_;
  std::map<int, uint64_t> responses_by_status_;
};

}  // namespace kvplan::server
