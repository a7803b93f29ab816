// kvplan inspect: what a model file is — architecture, geometry, tensor types, fingerprint — and
// what its KV cache costs per token in a few formats.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "core/hash.h"
#include "core/json_text.h"
#include "formats/kv_bytes.h"
#include "formats/kv_pair.h"
#include "model/model_weights.h"

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

// The steady-state bytes per token of one pair on every layer, or why the model's rows refuse it.
struct KvBytesRow {
  std::string kv;
  std::optional<double> bytes_per_token;
  std::string unsupported;
};

struct InspectResult {
  std::string path;  // as given
  ModelInfo info;
  std::string harness_problem;  // empty when the harness runs the model
  TensorTotals totals;
  std::map<std::string, int> tensor_types;
  std::vector<KvBytesRow> kv;
};

InspectResult inspect(const InspectOptions& o) {
  InspectResult r;
  r.path = o.model;
  r.info = read_model_info(o.model);
  const ModelConfig& c = r.info.config;
  r.harness_problem = harness_support_problem(c, r.info.file_format);
  r.totals = tensor_totals(r.info.tensors);
  const KvGeometry g = kv_geometry(c);
  QuantSettings settings;
  settings.block_size = 1;
  for (const char* name : kInspectPairs) {
    const KvPair pair = KvPair::parse(name);
    const std::vector<KvPair> pairs(static_cast<size_t>(c.n_layers), pair);
    KvBytesRow row{.kv = pair.name(), .bytes_per_token = {}, .unsupported = {}};
    try {
      row.bytes_per_token = kv_bytes_per_token(g, pairs, settings);
    } catch (const Error& err) {
      row.unsupported = err.what();
    }
    r.kv.push_back(std::move(row));
  }
  r.tensor_types = tensor_type_histogram(r.info.tensors);
  return r;
}

nlohmann::json to_json(const InspectResult& r) {
  const ModelConfig& c = r.info.config;
  nlohmann::json kv = nlohmann::json::array();
  for (const KvBytesRow& row : r.kv) {
    nlohmann::json e{{"kv", row.kv}};
    if (row.bytes_per_token) {
      e["bytes_per_token"] = *row.bytes_per_token;
    } else {
      e["bytes_per_token"] = nullptr;
      e["unsupported"] = row.unsupported;
    }
    kv.push_back(e);
  }
  return {{"path", r.path},
          {"file_format", r.info.file_format},
          {"name", c.name},
          {"architecture", c.architecture},
          {"supported_by_harness", r.harness_problem.empty()},
          {"harness_problem",
           r.harness_problem.empty() ? nlohmann::json() : nlohmann::json(r.harness_problem)},
          {"fingerprint", hash_hex(r.info.fingerprint)},
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
          {"parameters", r.totals.parameters},
          {"tensor_bytes", r.totals.bytes},
          {"tensor_types", r.tensor_types},
          {"kv_bytes_per_token", kv}};
}

void print_text(const InspectResult& r) {
  const ModelConfig& c = r.info.config;
  std::printf("model         %s (%s, %s)\n", c.name.c_str(), r.path.c_str(),
              r.info.file_format.c_str());
  std::printf("architecture  %s%s\n", c.architecture.c_str(),
              r.harness_problem.empty() ? "" : " (not runnable by the harness)");
  if (!r.harness_problem.empty()) std::printf("harness       %s\n", r.harness_problem.c_str());
  std::printf("fingerprint   %s\n", hash_hex(r.info.fingerprint).c_str());
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
  std::printf("parameters    %.2fM in %s\n", static_cast<double>(r.totals.parameters) / 1e6,
              format_bytes(static_cast<double>(r.totals.bytes), 2).c_str());
  std::string types;
  for (const auto& [type, count] : r.tensor_types)
    types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", type, count);
  std::printf("tensor types  %s\n\n", types.c_str());
  std::printf("%-12s %14s\n", "KV", "bytes/token");
  for (const KvBytesRow& row : r.kv) {
    if (!row.bytes_per_token) {
      std::printf("%-12s %14s\n", row.kv.c_str(), "n/a (row too short)");
    } else {
      std::printf("%-12s %14.1f\n", row.kv.c_str(), *row.bytes_per_token);
    }
  }
}

void run_inspect(const InspectOptions& o) {
  const InspectResult result = inspect(o);
  if (o.json) {
    std::printf("%s\n", json_text(to_json(result), 2).c_str());
  } else {
    print_text(result);
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
