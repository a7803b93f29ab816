// The weights of a Llama-family model (Llama 2/3, Mistral, Qwen2 with q/k/v biases, SmolLM2) as
// f32 row-major matrices, dequantized once at load from GGUF or HF safetensors + config.json.
//
// Matrices are [out, in] (PyTorch's Linear.weight order; GGUF's dims reversed), so a projection of
// a chunk X [T, in] is X * W^T. Q/K/V are fused into one [q + k + v, hidden] matrix and gate/up
// into one [2 * ffn, hidden] matrix so that a chunk needs one GEMM for each.
//
//   kvplan::ModelWeights w = kvplan::load_model_weights("stories260K.gguf");
//   w.config.n_layers;  w.layers[0].wqkv.rows();  kvplan::hash_hex(w.fingerprint);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "model/model_config.h"

namespace kvplan {

class GgufFile;
class SafetensorsSet;

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::Matrix<float, 1, Eigen::Dynamic>;  // a row vector: broadcasts over [T, n]

struct LayerWeights {
  Vector attn_norm;     // [hidden]
  RowMatrix wqkv;       // [(n_heads + 2 n_kv_heads) head_dim, hidden]: rows of Q, then K, then V
  Vector bqkv;          // [(n_heads + 2 n_kv_heads) head_dim] or empty (no attention bias)
  RowMatrix wo;         // [hidden, n_heads head_dim]
  Vector ffn_norm;      // [hidden]
  RowMatrix w_gate_up;  // [2 ffn, hidden]: gate rows, then up rows
  RowMatrix w_down;     // [hidden, ffn]
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
  RowMatrix token_embd;     // [vocab, hidden]
  Vector output_norm;       // [hidden]
  RowMatrix output;         // [vocab, hidden]; empty when tied to token_embd
  std::vector<LayerWeights> layers;
  std::vector<float> rope_freq_factors;  // GGUF rope_freqs.weight (llama3 scaling), else empty
  std::vector<TensorSummary> tensors;    // every tensor of the file(s), sorted by name
  uint64_t fingerprint = 0;

  [[nodiscard]] const RowMatrix& lm_head() const { return output.size() ? output : token_embd; }
  [[nodiscard]] bool tied_embeddings() const { return output.size() == 0; }
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
ModelWeights load_gguf_weights(const GgufFile& gguf);
ModelWeights load_safetensors_weights(const std::filesystem::path& model_dir);

// Why load_model_weights would refuse this model read from a `file_format` ("gguf" or
// "safetensors") file: an architecture it does not run, or a RoPE variant it lacks; empty when it
// runs it.
std::string harness_support_problem(const ModelConfig& config, std::string_view file_format);

// Hash of the architecture fields and of the tensors' names, shapes and types — not the weights —
// so that a plan can say which model it was made for (ARCHITECTURE §3.2).
uint64_t model_fingerprint(const ModelConfig& config, const std::vector<TensorSummary>& tensors);

// Number of tensors per storage type ("Q4_1" -> 120, ...).
std::map<std::string, int> tensor_type_histogram(const std::vector<TensorSummary>& tensors);

}  // namespace kvplan
