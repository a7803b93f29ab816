// kvplan estimate: KV-cache memory for a model at given contexts, formats and sequence counts.
#include <cstdio>
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
#include "formats/kv_memory_estimate.h"
#include "formats/kv_pair.h"
#include "model/model_config.h"

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

struct EstimateRow {
  std::string kv;  // the choice's label: "K8V4", "plan:plan.json"
  KvMemoryEstimate memory;
};

struct EstimateResult {
  ModelConfig config;
  int n_layers = 0;
  QuantSettings settings;
  KvMemoryQuestion question;
  std::vector<EstimateRow> rows;
};

EstimateResult estimate(const EstimateOptions& o) {
  EstimateResult r;
  r.config = load_model_config(o.model, config_dir() / "models");
  const KvGeometry geometry = kv_geometry(r.config);
  QuantSettings defaults;
  defaults.block_size = 1;  // exact token counts unless a plan or --block-size says otherwise
  const ResolvedKv kv = resolve_kv_flags(o.kv, geometry, r.config.source, defaults);
  r.settings = kv.settings;
  if (o.sequences <= 0) {
    fail(ErrorCode::kInvalidArgument, "--sequences {}: expected a positive number", o.sequences);
  }
  for (const std::string& c : o.contexts) {
    r.question.contexts.push_back(parse_token_count(c, "--context"));
  }
  r.question.sequences = o.sequences;

  r.n_layers = geometry.n_layers();
  std::vector<KvChoice> candidates = kv.choices;
  if (candidates.empty()) {
    for (const char* name : kDefaultPairs) {
      const KvPair pair = KvPair::parse(name);
      if (pair_fits_every_layer(geometry, pair, r.settings)) {
        candidates.push_back({pair.name(), std::vector<KvPair>(r.n_layers, pair)});
      }
    }
  }

  if (!o.gpu_memory.empty()) {
    const uint64_t gpu = parse_byte_size(o.gpu_memory, "--gpu-memory");
    const uint64_t weights =
        o.weights_bytes.empty() ? 0 : parse_byte_size(o.weights_bytes, "--weights-bytes");
    if (weights >= gpu) {
      fail(ErrorCode::kInvalidArgument, "--weights-bytes {} leaves nothing of --gpu-memory {}",
           o.weights_bytes, o.gpu_memory);
    }
    r.question.available_bytes = gpu - weights;
  } else if (!o.weights_bytes.empty()) {
    fail(ErrorCode::kInvalidArgument, "--weights-bytes needs --gpu-memory");
  }

  for (const KvChoice& c : candidates) {
    r.rows.push_back({c.label, estimate_kv_memory(geometry, c.pairs, r.settings, r.question)});
  }
  return r;
}

nlohmann::json to_json(const EstimateResult& r) {
  const ModelConfig& config = r.config;
  nlohmann::json out;
  out["model"] = {{"name", config.name},
                  {"source", config.source},
                  {"architecture", config.architecture},
                  {"num_layers", r.n_layers},
                  {"num_kv_heads", config.n_kv_heads},
                  {"head_dim", config.head_dim},
                  {"sliding_window", config.sliding_window}};
  out["quantization"] = {{"mode", quant_mode_name(r.settings.mode)},
                         {"group_size", r.settings.group_size},
                         {"residual_length", r.settings.residual_length},
                         {"block_size", r.settings.block_size}};
  out["sequences"] = r.question.sequences;
  if (r.question.available_bytes) out["available_bytes"] = *r.question.available_bytes;
  out["estimates"] = nlohmann::json::array();
  for (const EstimateRow& row : r.rows) {
    const KvMemoryEstimate& m = row.memory;
    nlohmann::json e;
    e["kv"] = row.kv;
    e["bytes_per_token"] = m.bytes_per_token;
    e["equivalent_bits"] = m.equivalent_bits;
    e["contexts"] = nlohmann::json::array();
    for (const KvContextBytes& c : m.contexts) {
      e["contexts"].push_back({{"context", c.context},
                               {"bytes", c.bytes},
                               {"bf16_bytes", c.bf16_bytes},
                               {"compression_vs_bf16", c.compression_vs_bf16()}});
    }
    if (m.max_context_per_sequence) {
      e["max_context_per_sequence"] = *m.max_context_per_sequence;
      e["max_total_tokens"] = *m.max_context_per_sequence * r.question.sequences;
    }
    out["estimates"].push_back(e);
  }
  return out;
}

void print_text(const EstimateResult& r) {
  const ModelConfig& config = r.config;
  const int n = r.n_layers;
  const std::optional<uint64_t>& available = r.question.available_bytes;
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
              std::string(quant_mode_name(r.settings.mode)).c_str(), r.settings.group_size,
              r.settings.block_size, static_cast<long long>(r.question.sequences));
  std::string header = fmt::format("{:<36} {:>6} {:>10} {:>8}", "KV", "bits", "B/token", "vs bf16");
  for (int64_t t : r.question.contexts) header += fmt::format(" {:>12}", fmt::format("T={}", t));
  if (available) header += fmt::format(" {:>14}", "fits (tokens)");
  std::printf("%s\n", header.c_str());
  for (const EstimateRow& row : r.rows) {
    const KvMemoryEstimate& m = row.memory;
    const double ratio = m.contexts.empty() ? 0.0 : m.contexts[0].compression_vs_bf16();
    std::string line = fmt::format("{:<36} {:>6.2f} {:>10.1f} {:>7.2f}x", row.kv, m.equivalent_bits,
                                   m.bytes_per_token, ratio);
    for (const KvContextBytes& c : m.contexts) {
      line += fmt::format(" {:>12}", format_bytes(static_cast<double>(c.bytes), 2));
    }
    if (m.max_context_per_sequence) line += fmt::format(" {:>14}", *m.max_context_per_sequence);
    std::printf("%s\n", line.c_str());
  }
  if (available) {
    std::printf("\n'fits': the longest context per sequence when %lld sequence(s) share %s.\n",
                static_cast<long long>(r.question.sequences),
                format_bytes(static_cast<double>(*available), 2).c_str());
  }
}

void run_estimate(const EstimateOptions& o) {
  const EstimateResult result = estimate(o);
  if (o.json) {
    std::printf("%s\n", json_text(to_json(result), 2).c_str());
  } else {
    print_text(result);
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
