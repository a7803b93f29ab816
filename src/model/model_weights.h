// The weights of a Llama-family model (Llama 2/3, Mistral, Qwen2 with q/k/v biases, SmolLM2, Qwen3,
// Phi-3, Gemma 2/3) from GGUF or HF safetensors + config.json. Matrices stay in the type the file
// stores them in, read in place from the memory-mapped file (weight_matrix.h); the small vectors
// (norms, biases) are f32 copies.
//
// Matrices are [out, in] (PyTorch's Linear.weight order; GGUF's dims reversed), so a projection of
// a chunk X [T, in] is X * W^T. Q/K/V are stacked into one [q + k + v, hidden] matrix and gate/up
// into one [2 * ffn, hidden] matrix so that a chunk needs one product for each.
//
//   kvplan::ModelWeights w = kvplan::load_model_weights("stories260K.gguf");
//   w.config.n_layers;  w.layers[0].wqkv.rows();  kvplan::hash_hex(w.fingerprint);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "model/model_config.h"
#include "model/weight_matrix.h"

namespace kvplan {

class GgufFile;
class SafetensorsSet;

struct LayerWeights {
  Vector attn_norm;        // [hidden]
  WeightMatrix wqkv;       // [(n_heads + 2 n_kv_heads) head_dim, hidden]: rows of Q, then K, then V
  Vector bqkv;             // [(n_heads + 2 n_kv_heads) head_dim] or empty (no attention bias)
  WeightMatrix wo;         // [hidden, n_heads head_dim]
  Vector ffn_norm;         // [hidden]
  WeightMatrix w_gate_up;  // [2 ffn, hidden]: gate rows, then up rows
  WeightMatrix w_down;     // [hidden, ffn]
  // config.qk_norm: [head_dim] each; config.post_norms: [hidden] each; empty otherwise.
  Vector q_norm, k_norm;
  Vector post_attn_norm, post_ffn_norm;
};

// A tensor as stored in the model file (for the fingerprint and `kvplan inspect`).
struct TensorSummary {
  std::string name;
  std::vector<uint64_t> shape;  // outermost first
  std::string type;             // ggml type name or safetensors dtype
  uint64_t bytes = 0;
};

struct ModelWeights {
  ModelConfig config;
  std::filesystem::path path;
  std::string file_format;  // "gguf" or "safetensors"
  WeightMatrix token_embd;  // [vocab, hidden]
  Vector output_norm;       // [hidden]
  WeightMatrix output;      // [vocab, hidden]; empty when tied to token_embd
  std::vector<LayerWeights> layers;
  std::vector<float> rope_freq_factors;  // GGUF rope_freqs.weight (llama3 scaling), else empty
  std::vector<TensorSummary> tensors;    // every tensor of the file(s), sorted by name
  uint64_t fingerprint = 0;

  [[nodiscard]] const WeightMatrix& lm_head() const { return output.empty() ? token_embd : output; }
  [[nodiscard]] bool tied_embeddings() const { return output.empty(); }
  [[nodiscard]] size_t n_parameters() const;
};

// What a model file says about itself, without reading the weights (for `kvplan inspect` and for
// fingerprints): the config, the tensors as stored, the fingerprint.
struct ModelInfo {
  ModelConfig config;
  std::filesystem::path path;
  std::string file_format;             // "gguf" or "safetensors"
  std::vector<TensorSummary> tensors;  // sorted by name
  uint64_t fingerprint = 0;
};
ModelInfo read_model_info(const std::filesystem::path& path);

// `path`: a .gguf file, or an HF model directory (config.json + *.safetensors [+ index]). Throws
// Error naming the file and tensor: kUnimplemented for an architecture or tensor type kvplan cannot
// run, kNotFound for a missing tensor, kInvalidArgument for a wrong shape.
ModelWeights load_model_weights(const std::filesystem::path& path);
ModelWeights load_gguf_weights(std::shared_ptr<const GgufFile> gguf);
ModelWeights load_safetensors_weights(const std::filesystem::path& model_dir);

// Why load_model_weights would refuse this model read from a `file_format` ("gguf" or
// "safetensors") file: an architecture it does not run, or a RoPE variant it lacks; empty when it
// runs it.
std::string harness_support_problem(const ModelConfig& config, std::string_view file_format);

// Hash of the architecture fields and of the tensors' names, shapes and types — not the weights —
// so that a plan can say which model it was made for (ARCHITECTURE §3.2).
uint64_t model_fingerprint(const ModelConfig& config, const std::vector<TensorSummary>& tensors);

// The model as profiles and plans record it: name, architecture, fingerprint (hex) and KV
// geometry, sliding windows included.
KvModel kv_model(const ModelWeights& weights);

// Number of tensors per storage type ("Q4_1" -> 120, ...).
std::map<std::string, int> tensor_type_histogram(const std::vector<TensorSummary>& tensors);

// What the tensors hold as stored: values (the parameter count) and bytes.
struct TensorTotals {
  uint64_t parameters = 0;
  uint64_t bytes = 0;
};
TensorTotals tensor_totals(const std::vector<TensorSummary>& tensors);

}  // namespace kvplan
