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
#include "core/json_text.h"
#include "formats/kv_pair.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"

namespace kvplan::cli {
namespace {

constexpr int kTraceTop = 5;  // tokens per step in --trace-out

struct GenerateOptions {
  std::string model, prompt, kv, mode, trace_out;
  bool chat = false;
  int max_tokens = 64;
  int threads = 0;
};

int32_t argmax(const RowMatrix& logits) {
  Eigen::Index best = 0;
  logits.row(logits.rows() - 1).maxCoeff(&best);
  return static_cast<int32_t>(best);
}

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

void run_generate(const GenerateOptions& o) {
  if (o.prompt.empty()) fail(ErrorCode::kInvalidArgument, "--prompt: the prompt is empty");
  if (o.max_tokens < 0)
    fail(ErrorCode::kInvalidArgument, "--max-tokens {}: expected >= 0", o.max_tokens);
  set_compute_threads(o.threads);
  const ModelWeights weights = load_model_weights(o.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  const Transformer model(weights);
  KvCacheOptions kv = KvCacheOptions::exact_kv();
  if (!o.kv.empty()) {
    QuantSettings settings;
    if (!o.mode.empty()) settings.mode = parse_quant_mode(o.mode);
    kv = KvCacheOptions::uniform(KvPair::parse(o.kv), weights.config.n_layers, settings);
  }
  KvCache cache(weights.config, kv);

  std::string text = o.prompt;
  if (o.chat) text = tokenizer->apply_chat_template({{"user", o.prompt}}, true);
  std::vector<int32_t> ids = tokenizer->encode(text, {.add_bos = true, .parse_special = o.chat});
  if (ids.empty()) fail(ErrorCode::kInvalidArgument, "--prompt: tokenizes to no tokens");
  const std::vector<int32_t> stops = tokenizer->stop_ids();

  std::string shown = o.chat ? std::string() : o.prompt;
  std::printf("%s", shown.c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  RowMatrix logits = model.forward(ids, cache, nullptr, {.last_logits_only = true});
  const auto prefill_end = std::chrono::steady_clock::now();
  nlohmann::json steps = nlohmann::json::array();
  int generated = 0;
  for (; generated < o.max_tokens; ++generated) {
    const int32_t next = argmax(logits);
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
  cmd->add_option("--prompt", o->prompt, "The prompt text")->required();
  cmd->add_flag("--chat", o->chat, "Wrap the prompt in the model's chat template");
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens to generate (default 64)");
  cmd->add_option("--kv", o->kv, "Quantize the KV cache with this pair (default: exact)");
  cmd->add_option("--mode", o->mode, "per-token or kivi (with --kv)");
  cmd->add_option("--threads", o->threads, "Compute threads (default: all cores)");
  cmd->add_option("--trace-out", o->trace_out,
                  "Write each step's 5 most likely tokens and their logits as JSON (to compare "
                  "with another engine's greedy output)");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace kvplan::cli
