// kvplan generate: greedy decoding with the embedded harness (a quick end-to-end check of a model,
// its tokenizer and a KV-cache configuration).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "core/error.h"
#include "formats/kv_pair.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"

namespace kvplan::cli {
namespace {

struct GenerateOptions {
  std::string model, prompt, kv, mode;
  bool chat = false;
  int max_tokens = 64;
  int threads = 0;
};

int32_t argmax(const RowMatrix& logits) {
  Eigen::Index best = 0;
  logits.row(logits.rows() - 1).maxCoeff(&best);
  return static_cast<int32_t>(best);
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
  int generated = 0;
  for (; generated < o.max_tokens; ++generated) {
    const int32_t next = argmax(logits);
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
    std::printf("%s", tokenizer->token_text(next).c_str());
    std::fflush(stdout);
    if (static_cast<int64_t>(cache.layer(0).n_tokens()) + 1 > (int64_t{1} << 20)) break;
    const int32_t one[1] = {next};
    logits = model.forward(one, cache, nullptr, {.last_logits_only = true});
  }
  const auto end = std::chrono::steady_clock::now();
  std::printf("\n");
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
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace kvplan::cli
