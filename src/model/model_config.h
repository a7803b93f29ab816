// ModelConfig: the architecture facts kvplan needs about a model, from an HF config.json, a GGUF
// header, or a preset in configs/models/. The estimator uses the KV geometry; the harness uses the
// rest.
//
//   kvplan::ModelConfig c = kvplan::load_model_config("SmolLM2-135M", "configs/models");
//   c.n_layers;  c.n_kv_heads[layer];  c.head_dim;
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "formats/kv_geometry.h"

namespace kvplan {

class GgufFile;

enum class RopeLayout {
  kAdjacentPairs,  // rotate (x[2i], x[2i+1]): GGUF llama weights, ggml's "normal" RoPE
  kHalfSplit,      // rotate (x[i], x[i + d/2]): HF Llama/Qwen2 weights, ggml's "neox" RoPE
};

enum class RopeScaling { kNone, kLinear, kLlama3 };

enum class FfnActivation {
  kSilu,      // SwiGLU: silu(gate) * up (Llama, Mistral, Qwen2)
  kGeluTanh,  // GeGLU with the tanh approximation: gelu(gate) * up (Gemma)
};

struct ModelConfig {
  std::string name;
  std::string architecture;  // "llama", "qwen2", "mistral", ... (GGUF arch or HF model_type)
  std::string source;        // the file the config was read from
  int n_layers = 0;
  int n_heads = 0;
  std::vector<int> n_kv_heads;  // per layer (GQA/MQA/MHA and per-layer counts)
  int head_dim = 0;             // per head, keys and values
  int hidden_size = 0;
  int ffn_size = 0;
  int vocab_size = 0;
  std::vector<int64_t> sliding_window;  // per layer; 0 = full attention
  int64_t context_length = 0;
  double rope_theta = 10000.0;
  RopeLayout rope_layout = RopeLayout::kHalfSplit;
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_factor = 1.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_context = 8192;
  double rms_norm_eps = 1e-5;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  bool tied_embeddings = false;
  // Gemma-style blocks; the defaults are the Llama family's.
  bool qk_norm = false;     // RMS norm over each Q and K head (weights attn_q_norm/attn_k_norm)
  bool post_norms = false;  // RMS norms on the attention and FFN outputs before each residual add
  FfnActivation ffn_activation = FfnActivation::kSilu;
  double embedding_scale = 1.0;     // token embeddings are multiplied by it (Gemma: sqrt(hidden))
  double attention_scale = 0.0;     // the q.k multiplier; 0 = 1 / sqrt(head_dim)
  double rope_theta_sliding = 0.0;  // RoPE base of the sliding-window layers; 0 = rope_theta
  // Gemma 2: scores and logits pass through cap * tanh(x / cap); 0 = no cap.
  double attn_logit_softcap = 0.0;
  double final_logit_softcap = 0.0;
  // A RoPE scaling the harness does not implement ("yarn", "longrope", ...): the estimator needs
  // none of it, so the config loads and the harness refuses the model naming it. Empty = none.
  std::string unsupported_rope_scaling;
  // HF Gemma checkpoints store each RMS norm weight as w and apply 1 + w; GGUF converters store
  // 1 + w. The loader adds 1 when this is set, so the forward applies plain weights.
  bool norm_weights_offset_by_one = false;
};

// Reads an HF config.json (or a directory holding one). Refuses MLA and hybrid (SSM/linear
// attention) models with Error(kUnimplemented) and malformed fields with kInvalidArgument, naming
// the file and field.
ModelConfig load_hf_config(const std::filesystem::path& path);
ModelConfig hf_config_from_json(const nlohmann::json& j, const std::string& source);
// config.json text already in memory (`source` names it in errors); load_hf_config reads a file.
ModelConfig hf_config_from_text(std::string_view text, const std::string& source);
ModelConfig gguf_model_config(const GgufFile& gguf);

// The KV-cache shape the estimator, plans and the runtime work with.
KvGeometry kv_geometry(const ModelConfig& config);

// `spec` is a config.json, a directory holding one, a .gguf file (only its header is read) or the
// name of a preset in `presets_dir` (e.g. "llama-3.1-8b").
ModelConfig load_model_config(const std::string& spec, const std::filesystem::path& presets_dir);

}  // namespace kvplan
