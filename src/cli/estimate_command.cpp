// kvplan estimate: KV-cache memory for a model at given contexts, formats and sequence counts.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/kv_flags.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "core/json_text.h"
#include "formats/kv_pair.h"
#include "model/model_config.h"
#include "formats/kv_bytes.h"
#include "plan/plan.h"

namespace kvplan::cli {
namespace {

struct EstimateOptions {
  std::string model;
  std::vector<std::string> contexts = {"4K", "32K", "128K"};
  int64_t sequences = 1;
  KvFlags kv;
  std::string gpu_memory, weights_bytes;
  bool json = false;
};

// What the table compares when the user names no format.
const char* kDefaultPairs[] = {"KV16",      "q8_0/q8_0", "KV8",  "K8V4",
                               "q4_0/q4_0", "KV4",       "K4V2", "KV2"};

bool fits_model(const KvGeometry& g, const KvPair& pair, const QuantSettings& s) {
  try {
    for (int l = 0; l < g.n_layers(); ++l) (void)layer_bytes_per_token(g.layers[l], pair, s, l);
    return true;
  } catch (const Error&) {
    return false;
  }
}

void run_estimate(const EstimateOptions& o) {
  ModelConfig config = load_model_config(o.model, config_dir() / "models");
  const KvGeometry geometry = kv_geometry(config);
  QuantSettings defaults;
  defaults.block_size = 1;  // exact token counts unless a plan or --block-size says otherwise
  const ResolvedKv kv = resolve_kv_flags(o.kv, geometry, config.source, defaults);
  const QuantSettings& settings = kv.settings;
  if (o.sequences <= 0) {
    fail(ErrorCode::kInvalidArgument, "--sequences {}: expected a positive number", o.sequences);
  }
  std::vector<int64_t> contexts;
  for (const std::string& c : o.contexts) contexts.push_back(parse_token_count(c, "--context"));

  const int n = geometry.n_layers();
  std::vector<KvChoice> candidates = kv.choices;
  if (candidates.empty()) {
    for (const char* name : kDefaultPairs) {
      const KvPair pair = KvPair::parse(name);
      if (fits_model(geometry, pair, settings)) {
        candidates.push_back({pair.name(), std::vector<KvPair>(n, pair)});
      }
    }
  }

  std::optional<uint64_t> available;
  if (!o.gpu_memory.empty()) {
    const uint64_t gpu = parse_byte_size(o.gpu_memory, "--gpu-memory");
    const uint64_t weights =
        o.weights_bytes.empty() ? 0 : parse_byte_size(o.weights_bytes, "--weights-bytes");
    if (weights >= gpu) {
      fail(ErrorCode::kInvalidArgument, "--weights-bytes {} leaves nothing of --gpu-memory {}",
           o.weights_bytes, o.gpu_memory);
    }
    available = gpu - weights;
  } else if (!o.weights_bytes.empty()) {
    fail(ErrorCode::kInvalidArgument, "--weights-bytes needs --gpu-memory");
  }

  const std::vector<KvPair> bf16(n, KvPair::parse("KV16"));
  QuantSettings bf16_settings = settings;
  bf16_settings.mode = QuantMode::kPerToken;
  nlohmann::json out;
  out["model"] = {{"name", config.name},
                  {"source", config.source},
                  {"architecture", config.architecture},
                  {"num_layers", n},
                  {"num_kv_heads", config.n_kv_heads},
                  {"head_dim", config.head_dim},
                  {"sliding_window", config.sliding_window}};
  out["quantization"] = {{"mode", quant_mode_name(settings.mode)},
                         {"group_size", settings.group_size},
                         {"residual_length", settings.residual_length},
                         {"block_size", settings.block_size}};
  out["sequences"] = o.sequences;
  if (available) out["available_bytes"] = *available;
  out["estimates"] = nlohmann::json::array();
  for (const KvChoice& c : candidates) {
    nlohmann::json e;
    e["kv"] = c.label;
    e["bytes_per_token"] = kv_bytes_per_token(geometry, c.pairs, settings);
    double bits = 0;
    for (int l = 0; l < n; ++l) bits += c.pairs[l].nominal_bits(geometry.layers[l].head_dim);
    e["equivalent_bits"] = bits / n;
    e["contexts"] = nlohmann::json::array();
    for (int64_t t : contexts) {
      const uint64_t bytes = kv_cache_bytes(geometry, c.pairs, settings, t, o.sequences);
      const uint64_t ref = kv_cache_bytes(geometry, bf16, bf16_settings, t, o.sequences);
      e["contexts"].push_back(
          {{"context", t},
           {"bytes", bytes},
           {"bf16_bytes", ref},
           {"compression_vs_bf16",
            bytes ? static_cast<double>(ref) / static_cast<double>(bytes) : 0.0}});
    }
    if (available) {
      const int64_t tokens =
          max_tokens_that_fit(geometry, c.pairs, settings, *available, o.sequences);
      e["max_context_per_sequence"] = tokens;
      e["max_total_tokens"] = tokens * o.sequences;
    }
    out["estimates"].push_back(e);
  }

  if (o.json) {
    std::printf("%s\n", json_text(out, 2).c_str());
    return;
  }
  std::string windows = "none";
  int n_sliding = 0;
  for (int l = 0; l < n; ++l) {
    if (config.sliding_window[l] == 0) continue;
    if (n_sliding++ == 0) windows = fmt::format("{} tokens", config.sliding_window[l]);
  }
  if (n_sliding > 0) windows += fmt::format(" on {} of {} layers", n_sliding, n);
  std::printf("model     %s (%s)\n", config.name.c_str(), config.source.c_str());
  std::printf("geometry  %d layers, %d KV heads, head_dim %d, sliding window: %s\n", n,
              config.n_kv_heads.front(), config.head_dim, windows.c_str());
  std::printf("settings  mode %s, group %zu, page %zu tokens, %lld sequence(s)\n\n",
              std::string(quant_mode_name(settings.mode)).c_str(), settings.group_size,
              settings.block_size, static_cast<long long>(o.sequences));
  std::string header = fmt::format("{:<36} {:>6} {:>10} {:>8}", "KV", "bits", "B/token", "vs bf16");
  for (int64_t t : contexts) header += fmt::format(" {:>12}", fmt::format("T={}", t));
  if (available) header += fmt::format(" {:>14}", "fits (tokens)");
  std::printf("%s\n", header.c_str());
  for (const nlohmann::json& e : out["estimates"]) {
    const double ratio =
        e["contexts"].empty() ? 0.0 : e["contexts"][0]["compression_vs_bf16"].get<double>();
    std::string line =
        fmt::format("{:<36} {:>6.2f} {:>10.1f} {:>7.2f}x", e["kv"].get<std::string>(),
                    e["equivalent_bits"].get<double>(), e["bytes_per_token"].get<double>(), ratio);
    for (const nlohmann::json& c : e["contexts"]) {
      line += fmt::format(" {:>12}", format_bytes(c["bytes"].get<double>(), 2));
    }
    if (available) line += fmt::format(" {:>14}", e["max_context_per_sequence"].get<int64_t>());
    std::printf("%s\n", line.c_str());
  }
  if (available) {
    std::printf("\n'fits': the longest context per sequence when %lld sequence(s) share %s.\n",
                static_cast<long long>(o.sequences),
                format_bytes(static_cast<double>(*available), 2).c_str());
  }
}

}  // namespace

void register_estimate_command(CLI::App& app) {
  auto o = std::make_shared<EstimateOptions>();
  CLI::App* cmd = app.add_subcommand("estimate", "KV-cache memory for a model, formats, contexts");
  cmd->footer(
      "Examples:\n"
      "  kvplan estimate --model llama-3.1-8b --context 32K --kv KV16\n"
      "  kvplan estimate --model config.json --context 8K,32K,128K --sequences 4 --kv K8V4\n"
      "  kvplan estimate --model llama-3.1-8b --gpu-memory 80GiB --weights-bytes 16GB --kv KV4\n"
      "  kvplan estimate --model minimax-m2.5 --plan configs/plans/minimax-m2.5-slot134.json");
  cmd->add_option("--model", o->model,
                  "config.json, a directory holding one, a .gguf file or a preset name")
      ->required();
  cmd->add_option("--context", o->contexts, "Context length(s) per sequence: 4096, 32K, ...")
      ->delimiter(',');
  cmd->add_option("--sequences", o->sequences, "Concurrent sequences");
  add_kv_flags(cmd, o->kv, /*several_pairs=*/true, /*with_block_size=*/true);
  cmd->add_option("--gpu-memory", o->gpu_memory, "GPU memory, e.g. 80GiB, to report what fits");
  cmd->add_option("--weights-bytes", o->weights_bytes, "Memory the weights take, e.g. 16GB");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_estimate(*o); });
}

}  // namespace kvplan::cli
