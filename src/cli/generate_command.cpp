// kvplan generate: greedy decoding with the embedded harness (a quick end-to-end check of a model,
// its tokenizer and a KV-cache configuration).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/json_fields.h"
#include "core/json_text.h"
#include "formats/kv_pair.h"
#include "model/greedy.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "plan/plan.h"
#include "serve/prefix_cache.h"

namespace kvplan::cli {
namespace {

constexpr int kTraceTop = 5;  // tokens per step in --trace-out

struct GenerateOptions {
  std::string model, prompt, messages, kv, plan, mode, trace_out;
  bool chat = false;
  int max_tokens = 64;
  int threads = 0;
  size_t chunk_tokens = 0;  // 0: the prompt in one piece
};

// The step's most likely tokens with their logits, best first (ties by lower id, as argmax): what
// shows whether a divergence from another engine's greedy choice sits at a near-tie.
nlohmann::json top_tokens(const RowMatrix& logits, const Tokenizer& tokenizer, int n) {
  const auto row = logits.row(logits.rows() - 1);
  std::vector<Eigen::Index> ids(static_cast<size_t>(row.size()));
  std::iota(ids.begin(), ids.end(), Eigen::Index{0});
  const auto k = std::min<ptrdiff_t>(n, static_cast<ptrdiff_t>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](Eigen::Index a, Eigen::Index b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  nlohmann::json top = nlohmann::json::array();
  for (ptrdiff_t i = 0; i < k; ++i) {
    const auto id = static_cast<int32_t>(ids[static_cast<size_t>(i)]);
    top.push_back({{"id", id},
                   {"text", tokenizer.token_text(id)},
                   {"logit", row[ids[static_cast<size_t>(i)]]}});
  }
  return top;
}

// --messages: [{"role": "system" | "user" | "assistant", "content": "..."}, ...]
std::vector<ChatMessage> read_chat_messages(const std::string& path) {
  const nlohmann::json j = parse_json_text(read_text_file(path), path);
  const JsonFields root(j, path);
  if (!j.is_array() || j.empty()) {
    fail(ErrorCode::kInvalidArgument, "{}: expected a non-empty JSON array of messages", path);
  }
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < root.size(); ++i) {
    const JsonFields m = root.element(i);
    messages.push_back({m.string("role"), m.string("content")});
  }
  return messages;
}

void run_generate(const GenerateOptions& o) {
  if (o.prompt.empty() == o.messages.empty()) {
    fail(ErrorCode::kInvalidArgument, "--prompt or --messages: give one of them, not empty");
  }
  if (o.max_tokens < 0)
    fail(ErrorCode::kInvalidArgument, "--max-tokens {}: expected >= 0", o.max_tokens);
  set_compute_threads(o.threads);
  const ModelWeights weights = load_model_weights(o.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  const Transformer model(weights);
  KvCacheOptions kv = KvCacheOptions::exact_kv();
  if (!o.kv.empty() && !o.plan.empty()) {
    fail(ErrorCode::kInvalidArgument, "--kv and --plan: give one of them");
  }
  if (!o.plan.empty()) {
    const Plan plan = read_plan(o.plan);
    check_plan_matches(plan, kv_model(weights).geometry, weights.config.source);
    kv = serve::cache_options(plan);
  } else if (!o.kv.empty()) {
    QuantSettings settings;
    if (!o.mode.empty()) settings.mode = parse_quant_mode(o.mode);
    kv = KvCacheOptions::uniform(KvPair::parse(o.kv), weights.config.n_layers, settings);
  }
  KvCache cache(weights.config, kv);

  const bool chat = o.chat || !o.messages.empty();
  std::string text = o.prompt;
  if (!o.messages.empty()) {
    text = tokenizer->apply_chat_template(read_chat_messages(o.messages), true);
  } else if (o.chat) {
    text = tokenizer->apply_chat_template({{"user", o.prompt}}, true);
  }
  std::vector<int32_t> ids = tokenizer->encode(text, {.add_bos = true, .parse_special = chat});
  if (ids.empty()) fail(ErrorCode::kInvalidArgument, "--prompt: tokenizes to no tokens");
  const std::vector<int32_t> stops = tokenizer->stop_ids();

  std::string shown = chat ? std::string() : o.prompt;
  std::printf("%s", shown.c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  // In chunk-aligned pieces, the prompt's KV is what `kvplan serve` restores from stored chunks.
  RowMatrix logits = o.chunk_tokens > 0
                         ? serve::prefill_aligned(model, ids, 0, cache, o.chunk_tokens)
                         : model.forward(ids, cache, nullptr, {.last_logits_only = true});
  const auto prefill_end = std::chrono::steady_clock::now();
  nlohmann::json steps = nlohmann::json::array();
  int generated = 0;
  for (; generated < o.max_tokens; ++generated) {
    const int32_t next = greedy_token(logits.row(logits.rows() - 1));
    const bool stop = std::find(stops.begin(), stops.end(), next) != stops.end();
    if (!o.trace_out.empty()) {
      steps.push_back({{"top", top_tokens(logits, *tokenizer, kTraceTop)}, {"stop", stop}});
    }
    if (stop) break;
    std::printf("%s", tokenizer->token_text(next).c_str());
    std::fflush(stdout);
    if (static_cast<int64_t>(cache.layer(0).n_tokens()) + 1 > (int64_t{1} << 20)) break;
    const int32_t one[1] = {next};
    logits = model.forward(one, cache, nullptr, {.last_logits_only = true});
  }
  const auto end = std::chrono::steady_clock::now();
  std::printf("\n");
  if (!o.trace_out.empty()) {
    const nlohmann::json trace{{"model", o.model},
                               {"prompt", text},
                               {"prompt_ids", ids},
                               {"kv", kv.describe()},
                               {"steps", steps}};
    write_file_atomic(o.trace_out, json_text(trace, 1) + "\n");
  }
  const double prefill_s = std::chrono::duration<double>(prefill_end - start).count();
  const double decode_s = std::chrono::duration<double>(end - prefill_end).count();
  spdlog::info("prompt {} tokens ({:.0f} tokens/s), generated {} tokens ({:.1f} tokens/s), KV {}",
               ids.size(), static_cast<double>(ids.size()) / prefill_s, generated,
               generated ? generated / decode_s : 0.0, kv.describe());
}

}  // namespace

void register_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd =
      app.add_subcommand("generate", "Greedy text generation with the embedded harness");
  cmd->footer("Example: kvplan generate --model stories260K.gguf --prompt \"Once upon a time\"");
  cmd->add_option("--model", o->model, "A .gguf file or an HF model directory")->required();
  cmd->add_option("--prompt", o->prompt, "The prompt text");
  cmd->add_option("--messages", o->messages,
                  "A JSON file of chat messages [{\"role\": ..., \"content\": ...}], rendered "
                  "with the model's chat template (instead of --prompt)");
  cmd->add_flag("--chat", o->chat, "Wrap the prompt in the model's chat template");
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens to generate (default 64)");
  cmd->add_option("--kv", o->kv, "Quantize the KV cache with this pair (default: exact)");
  cmd->add_option("--mode", o->mode, "per-token or kivi (with --kv)");
  cmd->add_option("--plan", o->plan, "Keep the KV cache in this plan's formats");
  cmd->add_option("--chunk-tokens", o->chunk_tokens,
                  "Prefill the prompt in pieces aligned to this many tokens, as kvplan serve "
                  "computes and stores them (default: one piece)");
  cmd->add_option("--threads", o->threads, "Compute threads (default: all cores)");
  cmd->add_option("--trace-out", o->trace_out,
                  "Write each step's 5 most likely tokens and their logits as JSON (to compare "
                  "with another engine's greedy output)");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace kvplan::cli
