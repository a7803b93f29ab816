// kvplan bench kv: what each KV configuration (a pair for every layer, or a plan) costs the
// harness on one model, all on the same inputs in one run, each beside the first: the memory its
// packed cache really holds at the given contexts (resident memory, against kvplan estimate's
// figure) and the prefill and decode tokens/s of the model over it.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/kv_flags.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "core/json_text.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "profile/calibration.h"
#include "serve/kv_bench.h"

namespace kvplan::cli {
namespace {

struct BenchKvOptions {
  std::string model, text;
  std::vector<std::string> memory_tokens = {"8K", "32K"};
  KvFlags kv;
  int64_t prompt_tokens = 4096, decode_tokens = 64;
  int threads = 0;
  bool json = false;
};

struct Config {
  std::string label;
  KvCacheOptions options;
};

std::vector<Config> configs_of(const ResolvedKv& kv, const KvGeometry& geometry) {
  std::vector<Config> out;
  for (const KvChoice& c : kv.choices) {
    KvCacheOptions options = KvCacheOptions::of_config(c.pairs, geometry, kv.settings);
    if (kv.plan && c.label.starts_with("plan:")) {
      for (const PlanLayer& l : kv.plan->layers) options.fp8_scales.push_back(l.fp8_scales);
    }
    out.push_back({c.label, options});
  }
  return out;
}

struct ConfigResult {
  std::string label;
  std::vector<serve::KvMemoryRow> memory;  // one per --memory-tokens context
  serve::KvSpeedRow speed;
};

// x / the first configuration's x (0 when that is 0).
double vs_first(double x, double first) {
  return first > 0 ? x / first : 0.0;
}

double resident_over_estimate(const serve::KvMemoryRow& m) {
  return static_cast<double>(m.resident_bytes) / static_cast<double>(m.estimate_bytes);
}

void print_json(const std::string& model, const std::vector<ConfigResult>& results) {
  const serve::KvSpeedRow& first = results.front().speed;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ConfigResult& r : results) {
    nlohmann::ordered_json memory = nlohmann::ordered_json::array();
    for (const serve::KvMemoryRow& m : r.memory) {
      memory.push_back({{"tokens", m.tokens},
                        {"estimate_bytes", m.estimate_bytes},
                        {"held_bytes", m.held_bytes},
                        {"resident_bytes", m.resident_bytes},
                        {"resident_over_estimate", resident_over_estimate(m)}});
    }
    rows.push_back(
        {{"kv", r.label},
         {"memory", memory},
         {"prompt_tokens", r.speed.prompt_tokens},
         {"decode_tokens", r.speed.decode_tokens},
         {"prefill_tokens_per_s", r.speed.prefill_tokens_per_s},
         {"decode_tokens_per_s", r.speed.decode_tokens_per_s},
         {"prefill_vs_first", vs_first(r.speed.prefill_tokens_per_s, first.prefill_tokens_per_s)},
         {"decode_vs_first", vs_first(r.speed.decode_tokens_per_s, first.decode_tokens_per_s)}});
  }
  std::printf("%s\n",
              json_text(nlohmann::ordered_json{{"model", model}, {"configs", rows}}, 2).c_str());
}

void print_text(const std::string& model, const std::string& text, const BenchKvOptions& o,
                const std::vector<ConfigResult>& results) {
  std::printf(
      "model %s; memory: random K/V rows committed in chunks of 512; speed: prefill %lld tokens "
      "of %s, then %lld greedy decode steps\n\n",
      model.c_str(), static_cast<long long>(o.prompt_tokens), text.c_str(),
      static_cast<long long>(o.decode_tokens));
  std::printf("%-24s %9s %12s %12s %12s %9s\n", "kv", "tokens", "estimate", "held", "resident",
              "res/est");
  for (const ConfigResult& r : results) {
    for (const serve::KvMemoryRow& m : r.memory) {
      std::printf("%-24s %9lld %12s %12s %12s %9.3f\n", r.label.c_str(),
                  static_cast<long long>(m.tokens),
                  format_bytes(static_cast<double>(m.estimate_bytes), 2).c_str(),
                  format_bytes(static_cast<double>(m.held_bytes), 2).c_str(),
                  format_bytes(static_cast<double>(m.resident_bytes), 2).c_str(),
                  resident_over_estimate(m));
    }
  }
  const serve::KvSpeedRow& first = results.front().speed;
  std::printf("\n%-24s %14s %9s %14s %9s\n", "kv", "prefill tok/s", "vs first", "decode tok/s",
              "vs first");
  for (const ConfigResult& r : results) {
    std::printf("%-24s %14.1f %8.2fx %14.2f %8.2fx\n", r.label.c_str(),
                r.speed.prefill_tokens_per_s,
                vs_first(r.speed.prefill_tokens_per_s, first.prefill_tokens_per_s),
                r.speed.decode_tokens_per_s,
                vs_first(r.speed.decode_tokens_per_s, first.decode_tokens_per_s));
  }
}

// The text's tokens, repeated until there are `n`.
std::vector<int32_t> prompt_tokens(const std::filesystem::path& file, const Tokenizer& tokenizer,
                                   int64_t n) {
  std::string text;
  for (const CalibrationItem& item : read_calibration_file(file)) {
    text += item.text;
    for (const ChatMessage& m : item.messages) text += m.content + "\n";
    text += "\n\n";
  }
  const std::vector<int32_t> once = tokenizer.encode(text, {.add_bos = false});
  if (once.empty()) fail(ErrorCode::kInvalidArgument, "--text {}: no tokens", file.string());
  std::vector<int32_t> tokens;
  if (const auto bos = tokenizer.bos_id()) tokens.push_back(*bos);
  while (static_cast<int64_t>(tokens.size()) < n) {
    tokens.insert(tokens.end(), once.begin(), once.end());
  }
  tokens.resize(static_cast<size_t>(n));
  return tokens;
}

void run_bench_kv(const BenchKvOptions& o) {
  if (o.prompt_tokens < 1 || o.decode_tokens < 0) {
    fail(ErrorCode::kInvalidArgument, "--prompt-tokens must be >= 1, --decode-tokens >= 0");
  }
  std::vector<int64_t> contexts;
  for (const std::string& t : o.memory_tokens) {
    contexts.push_back(parse_token_count(t, "--memory-tokens"));
  }
  const ModelWeights weights = load_model_weights(o.model);
  set_compute_threads(o.threads);
  const ResolvedKv kv =
      resolve_kv_flags(o.kv, kv_geometry(weights.config), weights.config.source, QuantSettings{});
  const std::vector<Config> configs = configs_of(kv, kv_geometry(weights.config));
  if (configs.empty()) fail(ErrorCode::kInvalidArgument, "--kv or --plan: nothing to measure");
  // A configuration the model's rows cannot take is refused before anything runs.
  for (const Config& c : configs) (void)KvCache(weights.config, c.options);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  const std::filesystem::path text = o.text.empty() ? config_dir() / "calibration" / "report.jsonl"
                                                    : std::filesystem::path(o.text);
  const std::vector<int32_t> prompt = prompt_tokens(text, *tokenizer, o.prompt_tokens);
  const Transformer model(weights);

  std::vector<ConfigResult> results;
  for (const Config& c : configs) {
    spdlog::info("bench kv: {}", c.label);
    ConfigResult r{c.label, {}, {}};
    for (const int64_t tokens : contexts) {
      r.memory.push_back(serve::measure_kv_memory(weights.config, c.options, tokens));
    }
    r.speed = serve::measure_kv_speed(model, c.options, prompt, o.decode_tokens);
    results.push_back(std::move(r));
  }
  if (o.json) {
    print_json(weights.config.name, results);
  } else {
    print_text(weights.config.name, text.filename().string(), o, results);
  }
}

}  // namespace

void register_bench_kv_command(CLI::App* bench) {
  auto o = std::make_shared<BenchKvOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "kv", "Memory held and prefill/decode tokens/s of KV configurations, side by side");
  cmd->footer(
      "Example: kvplan bench kv --model SmolLM2-135M-Instruct.Q4_1.gguf --kv f16/f16,q4_0/q4_0 "
      "--plan plan.json\n"
      "The first configuration is the reference of the ratios. Memory is measured in a child "
      "process per\n"
      "configuration and context (resident memory before and after filling the cache).");
  cmd->add_option("--model", o->model, "A .gguf file or an HF model directory")->required();
  add_kv_flags(cmd, o->kv, /*several_pairs=*/true);
  cmd->add_option("--memory-tokens", o->memory_tokens,
                  "Contexts whose cache memory is measured (default 8K,32K)")
      ->delimiter(',');
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "Prefill length (default 4096)");
  cmd->add_option("--decode-tokens", o->decode_tokens, "Greedy decode steps (default 64)");
  cmd->add_option("--text", o->text,
                  "Text the prompt is cut from (default configs/calibration/report.jsonl)");
  cmd->add_option("--threads", o->threads, "Compute threads (default: all cores)");
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->callback([o] { run_bench_kv(*o); });
}

}  // namespace kvplan::cli
