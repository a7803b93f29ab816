// kvplan serve: an OpenAI-compatible HTTP server over the harness's packed KV pages, with
// continuous batching and prefix reuse through the runtime's tiers (src/server, src/serve).
// SIGTERM or SIGINT drains: new requests get 503, the ones in flight finish, the process exits 0.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/kv_flags.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "formats/kv_bytes.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "plan/plan.h"
#include "serve/engine.h"
#include "serve/prefix_cache.h"
#include "server/openai_server.h"

namespace kvplan::cli {
namespace {

struct ServeOptions {
  std::string model, host = "127.0.0.1", model_name, kv_memory = "64MiB", host_memory = "1GiB",
                     disk, max_body = "1MiB";
  KvFlags kv;
  int port = 8080;
  size_t chunk_tokens = 256;
  int64_t staging_tokens = 0;  // 0: the longest sequence the KV memory holds
  int64_t default_max_tokens = 256;
  int threads = 0;
  int http_threads = 64;
};

// The KV configuration served: the plan, or one pair for every layer (exact bf16 KV without
// either).
Plan served_plan(const ServeOptions& o, const ModelWeights& weights) {
  const ResolvedKv kv =
      resolve_kv_flags(o.kv, kv_geometry(weights.config), weights.config.source, QuantSettings{});
  if (kv.plan) return *kv.plan;
  if (kv.choices.size() > 1) fail(ErrorCode::kInvalidArgument, "--kv: serve takes one pair");
  const KvModel model = kv_model(weights);
  const std::vector<KvPair> pairs =
      kv.choices.empty()
          ? std::vector<KvPair>(model.geometry.layers.size(), KvPair::parse("bf16/bf16"))
          : kv.choices.front().pairs;
  return plan_of_pairs(model, pairs, kv.settings);
}

// The device tier stages a prompt's restored and stored chunks and keeps them as its LRU cache. By
// default it has room for the longest prompt the engine can admit: what the KV memory holds, at
// most the model's context.
int64_t longest_admissible_prompt(const Plan& plan, const ModelWeights& weights,
                                  uint64_t kv_memory) {
  const double per_token =
      kv_bytes_per_token(plan.model.geometry, plan.kv_config(), plan.quantization);
  const auto held = static_cast<int64_t>(static_cast<double>(kv_memory) / per_token);
  const int64_t context = weights.config.context_length;
  return std::max<int64_t>(1, context > 0 ? std::min(held, context) : held);
}

void run_serve(const ServeOptions& o) {
  // Signals are taken by one thread (sigwait); every thread started from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (o.port < 0 || o.port > 65535) {
    fail(ErrorCode::kInvalidArgument, "--port {}: expected 0 (any free port) to 65535", o.port);
  }
  if (o.default_max_tokens < 1) {
    fail(ErrorCode::kInvalidArgument, "--default-max-tokens {}: expected >= 1",
         o.default_max_tokens);
  }
  if (o.http_threads < 1) fail(ErrorCode::kInvalidArgument, "--http-threads: expected >= 1");
  const uint64_t kv_memory = parse_byte_size(o.kv_memory, "--kv-memory");
  const ModelWeights weights = load_model_weights(o.model);
  set_compute_threads(o.threads);
  const Plan plan = served_plan(o, weights);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  const Transformer model(weights);
  if (o.staging_tokens < 0) fail(ErrorCode::kInvalidArgument, "--staging-tokens: expected >= 0");
  const int64_t staging =
      o.staging_tokens > 0 ? o.staging_tokens : longest_admissible_prompt(plan, weights, kv_memory);
  serve::EngineOptions engine_options;
  engine_options.kv_memory_bytes = kv_memory;
  engine_options.tiers = {.chunk_tokens = o.chunk_tokens,
                          .longest_prompt_tokens = static_cast<size_t>(staging),
                          .host_memory_bytes = parse_byte_size(o.host_memory, "--host-memory"),
                          .disk_dir = o.disk};
  serve::Engine engine(model, plan, engine_options);
  const std::string name =
      o.model_name.empty() ? std::filesystem::path(o.model).stem().string() : o.model_name;
  server::OpenAiServer http(engine, *tokenizer, weights.config,
                            {.model_name = name,
                             .default_max_tokens = o.default_max_tokens,
                             .max_body_bytes = parse_byte_size(o.max_body, "--max-body"),
                             .http_threads = o.http_threads});
  const int port = http.bind(o.host, o.port);
  std::printf(
      "kvplan serve: listening on http://%s:%d (model %s, KV %s at %.0f B/token, %s of KV "
      "memory, device tier staging %lld tokens)\n",
      o.host.c_str(), port, name.c_str(), serve::cache_options(plan).describe().c_str(),
      engine.counters().bytes_per_token, format_bytes(static_cast<double>(kv_memory), 2).c_str(),
      static_cast<long long>(staging));
  std::fflush(stdout);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("serve: {}: draining (new requests get 503)",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    http.drain();
  });
  const bool listened = http.listen();
  if (!listened) kill(getpid(), SIGTERM);  // wakes the waiter, which drains
  waiter.join();
  if (!listened) fail(ErrorCode::kIo, "{}:{}: the listener failed", o.host, port);
  spdlog::info("serve: drained");
}

}  // namespace

void register_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd =
      app.add_subcommand("serve", "OpenAI-compatible HTTP server over the plan's packed KV pages");
  cmd->footer(
      "Example: kvplan serve --model SmolLM2-135M-Instruct.Q4_1.gguf --plan plan-6480.json "
      "--kv-memory 64MiB --port 8080\n"
      "Endpoints: POST /v1/completions, /v1/chat/completions (stream or not); GET /v1/models, "
      "/health, /metrics.\nSIGTERM drains: requests in flight finish, new ones get 503, exit 0.");
  cmd->add_option("--model", o->model, "A .gguf file or an HF model directory")->required();
  add_kv_flags(cmd, o->kv, /*several_pairs=*/false);
  cmd->add_option("--kv-memory", o->kv_memory, "KV memory of the running requests (default 64MiB)");
  cmd->add_option("--host-memory", o->host_memory, "Host tier for stored prefixes (default 1GiB)");
  cmd->add_option("--disk", o->disk, "Disk tier directory (default: none)");
  cmd->add_option("--chunk-tokens", o->chunk_tokens, "Tokens per stored chunk (default 256)");
  cmd->add_option("--staging-tokens", o->staging_tokens,
                  "Device tier room in prompt tokens (default: the longest prompt the KV memory "
                  "holds; bench serve uses the workload's longest)");
  cmd->add_option("--host", o->host, "Address to bind (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (default 8080; 0: any free port, printed)");
  cmd->add_option("--served-model-name", o->model_name,
                  "The model id clients use (default: the model file's stem)");
  cmd->add_option("--default-max-tokens", o->default_max_tokens,
                  "Chat answers' length when a request names none (default 256)");
  cmd->add_option("--max-body", o->max_body, "Largest request body (default 1MiB)");
  cmd->add_option("--threads", o->threads, "Compute threads (default: all cores)");
  cmd->add_option("--http-threads", o->http_threads, "Connections served at once (default 64)");
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace kvplan::cli
