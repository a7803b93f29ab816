// kvplan inspect: what a model file is — architecture, geometry, tensor types, fingerprint — and
// what its KV cache costs per token in a few formats.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "core/hash.h"
#include "core/json_text.h"
#include "formats/kv_pair.h"
#include "model/model_weights.h"
#include "formats/kv_bytes.h"

namespace kvplan::cli {
namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
};

const char* kInspectPairs[] = {"KV16", "KV8", "K8V4",      "KV4",
                               "K4V2", "KV2", "q8_0/q8_0", "q4_0/q4_0"};

const char* layout_name(RopeLayout l) {
  return l == RopeLayout::kAdjacentPairs ? "adjacent pairs (ggml normal)" : "half split (neox)";
}

std::string rope_scaling_text(const ModelConfig& c) {
  switch (c.rope_scaling) {
    case RopeScaling::kLinear:
      return fmt::format("linear x{:g}", c.rope_factor);
    case RopeScaling::kLlama3:
      return fmt::format("llama3 x{:g}", c.rope_factor);
    case RopeScaling::kNone:
      break;
  }
  return c.unsupported_rope_scaling.empty() ? "none" : c.unsupported_rope_scaling;
}

void run_inspect(const InspectOptions& o) {
  const ModelInfo info = read_model_info(o.model);
  const ModelConfig& c = info.config;
  const std::string harness_problem = harness_support_problem(c, info.file_format);
  uint64_t params = 0, bytes = 0;
  for (const TensorSummary& t : info.tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    params += n;
    bytes += t.bytes;
  }
  const KvGeometry g = kv_geometry(c);
  QuantSettings settings;
  settings.block_size = 1;
  nlohmann::json kv = nlohmann::json::array();
  for (const char* name : kInspectPairs) {
    const KvPair pair = KvPair::parse(name);
    const std::vector<KvPair> pairs(static_cast<size_t>(c.n_layers), pair);
    nlohmann::json e{{"kv", pair.name()}};
    try {
      e["bytes_per_token"] = kv_bytes_per_token(g, pairs, settings);
    } catch (const Error& err) {
      e["bytes_per_token"] = nullptr;
      e["unsupported"] = err.what();
    }
    kv.push_back(e);
  }
  const auto histogram = tensor_type_histogram(info.tensors);
  nlohmann::json out{{"path", o.model},
                     {"file_format", info.file_format},
                     {"name", c.name},
                     {"architecture", c.architecture},
                     {"supported_by_harness", harness_problem.empty()},
                     {"harness_problem",
                      harness_problem.empty() ? nlohmann::json() : nlohmann::json(harness_problem)},
                     {"fingerprint", hash_hex(info.fingerprint)},
                     {"num_layers", c.n_layers},
                     {"num_attention_heads", c.n_heads},
                     {"num_kv_heads", c.n_kv_heads},
                     {"head_dim", c.head_dim},
                     {"hidden_size", c.hidden_size},
                     {"ffn_size", c.ffn_size},
                     {"vocab_size", c.vocab_size},
                     {"context_length", c.context_length},
                     {"rope_theta", c.rope_theta},
                     {"rope_theta_sliding", c.rope_theta_sliding},
                     {"sliding_window", c.sliding_window},
                     {"rope_layout", layout_name(c.rope_layout)},
                     {"rope_scaling", rope_scaling_text(c)},
                     {"attn_logit_softcap", c.attn_logit_softcap},
                     {"final_logit_softcap", c.final_logit_softcap},
                     {"rms_norm_eps", c.rms_norm_eps},
                     {"attention_bias", c.attention_bias},
                     {"tied_embeddings", c.tied_embeddings},
                     {"parameters", params},
                     {"tensor_bytes", bytes},
                     {"tensor_types", histogram},
                     {"kv_bytes_per_token", kv}};
  if (o.json) {
    std::printf("%s\n", json_text(out, 2).c_str());
    return;
  }
  std::printf("model         %s (%s, %s)\n", c.name.c_str(), o.model.c_str(),
              info.file_format.c_str());
  std::printf("architecture  %s%s\n", c.architecture.c_str(),
              harness_problem.empty() ? "" : " (not runnable by the harness)");
  if (!harness_problem.empty()) std::printf("harness       %s\n", harness_problem.c_str());
  std::printf("fingerprint   %s\n", hash_hex(info.fingerprint).c_str());
  std::printf("layers        %d, hidden %d, ffn %d, vocab %d\n", c.n_layers, c.hidden_size,
              c.ffn_size, c.vocab_size);
  std::printf("attention     %d heads, %d KV heads, head_dim %d%s%s\n", c.n_heads,
              c.n_kv_heads.front(), c.head_dim, c.attention_bias ? ", q/k/v bias" : "",
              c.qk_norm ? ", q/k norms" : "");
  const auto sliding = std::count_if(c.sliding_window.begin(), c.sliding_window.end(),
                                     [](int64_t w) { return w > 0; });
  if (sliding > 0) {
    const int64_t window = *std::max_element(c.sliding_window.begin(), c.sliding_window.end());
    std::printf("window        %lld tokens on %lld of %d layers (the others global)\n",
                static_cast<long long>(window), static_cast<long long>(sliding), c.n_layers);
  }
  std::printf("rope          theta %g%s, %s, scaling %s\n", c.rope_theta,
              c.rope_theta_sliding > 0
                  ? fmt::format(" (sliding layers {:g}, unscaled)", c.rope_theta_sliding).c_str()
                  : "",
              layout_name(c.rope_layout), rope_scaling_text(c).c_str());
  if (c.attn_logit_softcap > 0 || c.final_logit_softcap > 0) {
    std::printf("soft caps     attention scores %g, final logits %g\n", c.attn_logit_softcap,
                c.final_logit_softcap);
  }
  std::printf("embeddings    %s\n",
              c.tied_embeddings ? "tied (output = token_embd)" : "separate output matrix");
  std::printf("parameters    %.2fM in %s\n", static_cast<double>(params) / 1e6,
              format_bytes(static_cast<double>(bytes), 2).c_str());
  std::string types;
  for (const auto& [type, count] : histogram)
    types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", type, count);
  std::printf("tensor types  %s\n\n", types.c_str());
  std::printf("%-12s %14s\n", "KV", "bytes/token");
  for (const nlohmann::json& e : kv) {
    if (e["bytes_per_token"].is_null()) {
      std::printf("%-12s %14s\n", e["kv"].get<std::string>().c_str(), "n/a (row too short)");
    } else {
      std::printf("%-12s %14.1f\n", e["kv"].get<std::string>().c_str(),
                  e["bytes_per_token"].get<double>());
    }
  }
}

}  // namespace

void register_inspect_command(CLI::App& app) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Architecture, tensor types, fingerprint and KV bytes/token of a model");
  cmd->footer("Example: kvplan inspect --model SmolLM2-135M-Instruct.Q4_1.gguf --json");
  cmd->add_option("--model", o->model, "A .gguf file or an HF model directory")->required();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_inspect(*o); });
}

}  // namespace kvplan::cli
