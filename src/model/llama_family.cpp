// Llama, Mistral, Qwen2 and SmolLM2: RMSNorm, GQA attention with RoPE (optional q/k/v bias),
// SwiGLU FFN, optionally tied embeddings. Only the tensor names differ between GGUF and HF.
// Qwen3 adds per-head Q/K norms; Phi-3 fuses Q/K/V and gate/up in its files; Gemma 2/3 add
// post-attention/post-FFN norms (Gemma 3 the Q/K norms too).
#include "model/llama_family.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace kvplan {
namespace {

struct Names {
  std::string token_embd, output_norm, output;
  std::string attn_norm, q, k, v, o, q_bias, k_bias, v_bias, ffn_norm, gate, up, down;
  std::string q_norm, k_norm, post_attn_norm, post_ffn_norm;  // Qwen3 / Gemma blocks
  std::string qkv, gate_up;  // fused projections (Phi-3), used when the file holds them
};

Names gguf_names(int layer) {
  const std::string b = "blk." + std::to_string(layer) + ".";
  Names n;
  n.token_embd = "token_embd.weight";
  n.output_norm = "output_norm.weight";
  n.output = "output.weight";
  n.attn_norm = b + "attn_norm.weight";
  n.q = b + "attn_q.weight";
  n.k = b + "attn_k.weight";
  n.v = b + "attn_v.weight";
  n.o = b + "attn_output.weight";
  n.q_bias = b + "attn_q.bias";
  n.k_bias = b + "attn_k.bias";
  n.v_bias = b + "attn_v.bias";
  n.ffn_norm = b + "ffn_norm.weight";
  n.gate = b + "ffn_gate.weight";
  n.up = b + "ffn_up.weight";
  n.down = b + "ffn_down.weight";
  n.q_norm = b + "attn_q_norm.weight";
  n.k_norm = b + "attn_k_norm.weight";
  n.post_attn_norm = b + "post_attention_norm.weight";
  n.post_ffn_norm = b + "post_ffw_norm.weight";
  return n;
}

// transformers' checkpoint names. Gemma's "post_attention_layernorm" normalizes the attention
// output; Llama's normalizes the FFN input.
Names hf_names(const ModelConfig& c, int layer) {
  const std::string b = "model.layers." + std::to_string(layer) + ".";
  Names n;
  n.token_embd = "model.embed_tokens.weight";
  n.output_norm = "model.norm.weight";
  n.output = "lm_head.weight";
  n.attn_norm = b + "input_layernorm.weight";
  n.q = b + "self_attn.q_proj.weight";
  n.k = b + "self_attn.k_proj.weight";
  n.v = b + "self_attn.v_proj.weight";
  n.o = b + "self_attn.o_proj.weight";
  n.q_bias = b + "self_attn.q_proj.bias";
  n.k_bias = b + "self_attn.k_proj.bias";
  n.v_bias = b + "self_attn.v_proj.bias";
  n.ffn_norm = b + "post_attention_layernorm.weight";
  n.gate = b + "mlp.gate_proj.weight";
  n.up = b + "mlp.up_proj.weight";
  n.down = b + "mlp.down_proj.weight";
  n.q_norm = b + "self_attn.q_norm.weight";
  n.k_norm = b + "self_attn.k_norm.weight";
  n.qkv = b + "self_attn.qkv_proj.weight";
  n.gate_up = b + "mlp.gate_up_proj.weight";
  if (c.post_norms) {
    n.post_attn_norm = b + "post_attention_layernorm.weight";
    n.ffn_norm = b + "pre_feedforward_layernorm.weight";
    n.post_ffn_norm = b + "post_feedforward_layernorm.weight";
  }
  return n;
}

Names names_for(TensorNaming naming, const ModelConfig& c, int layer) {
  return naming == TensorNaming::kGguf ? gguf_names(layer) : hf_names(c, layer);
}

std::string shape_text(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

class Loader {
 public:
  Loader(const TensorSource& source) : source_(source) {}

  std::vector<float> read(const std::string& name, std::vector<uint64_t> expected) {
    check_shape(name, std::move(expected));
    return source_.read(name);
  }

  Vector vector(const std::string& name, uint64_t n) {
    const std::vector<float> v = read(name, {n});
    return Eigen::Map<const Vector>(v.data(), static_cast<Eigen::Index>(n));
  }

  // An RMS norm's weight as the forward applies it (1 + w for HF Gemma checkpoints).
  Vector norm(const std::string& name, uint64_t n, bool offset_by_one) {
    Vector w = vector(name, n);
    if (offset_by_one) w.array() += 1.0f;
    return w;
  }

  WeightMatrix matrix(const std::string& name, uint64_t rows, uint64_t cols) {
    check_shape(name, {rows, cols});
    return source_.matrix(name, static_cast<int64_t>(rows), static_cast<int64_t>(cols));
  }

  // Stacks matrices with the same column count vertically (fused projections).
  WeightMatrix stacked(const std::vector<std::pair<std::string, uint64_t>>& parts, uint64_t cols) {
    std::vector<WeightMatrix> matrices;
    for (const auto& [name, rows] : parts) matrices.push_back(matrix(name, rows, cols));
    return WeightMatrix::stacked(matrices);
  }

 private:
  void check_shape(const std::string& name, std::vector<uint64_t> expected) const {
    if (!source_.has(name)) {
      fail(ErrorCode::kNotFound, "{}: tensor '{}' is missing", source_.file, name);
    }
    std::vector<uint64_t> shape = source_.shape(name);
    // A [1, n] or [n, 1] tensor is the same vector as [n].
    if (expected.size() == 1 && shape.size() == 2 && (shape[0] == 1 || shape[1] == 1)) {
      shape = {shape[0] * shape[1]};
    }
    if (shape != expected) {
      fail(ErrorCode::kInvalidArgument, "{}: tensor '{}' has shape {}, expected {}", source_.file,
           name, shape_text(shape), shape_text(expected));
    }
  }

  const TensorSource& source_;
};

}  // namespace

int dimension_as_int(uint64_t dim, const std::string& file, const std::string& tensor) {
  if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    fail(ErrorCode::kInvalidArgument,
         "{}: tensor '{}' has a dimension of {}, expected 1 to {} for a model dimension", file,
         tensor, dim, std::numeric_limits<int>::max());
  }
  return static_cast<int>(dim);
}

void load_llama_family(const TensorSource& source, TensorNaming naming, ModelWeights& w) {
  ModelConfig& c = w.config;
  Loader load(source);
  const Names global = names_for(naming, c, 0);
  if (!source.has(global.token_embd)) {
    fail(ErrorCode::kNotFound, "{}: tensor '{}' is missing", source.file, global.token_embd);
  }
  const std::vector<uint64_t> embd_shape = source.shape(global.token_embd);
  if (embd_shape.size() != 2) {
    fail(ErrorCode::kInvalidArgument, "{}: tensor '{}' has shape {}, expected [vocab, {}]",
         source.file, global.token_embd, shape_text(embd_shape), c.hidden_size);
  }
  // The embedding rows are the vocabulary.
  c.vocab_size = dimension_as_int(embd_shape[0], source.file, global.token_embd);
  const uint64_t vocab = static_cast<uint64_t>(c.vocab_size);
  const uint64_t hidden = static_cast<uint64_t>(c.hidden_size);
  const uint64_t hd = static_cast<uint64_t>(c.head_dim);
  if (c.ffn_size <= 0) {
    const Names l0 = names_for(naming, c, 0);
    if (source.has(l0.gate) && !source.shape(l0.gate).empty()) {
      c.ffn_size = dimension_as_int(source.shape(l0.gate)[0], source.file, l0.gate);
    } else if (source.has(l0.gate_up) && !source.shape(l0.gate_up).empty()) {
      c.ffn_size = dimension_as_int(source.shape(l0.gate_up)[0] / 2, source.file, l0.gate_up);
    }
  }
  const uint64_t ffn = static_cast<uint64_t>(c.ffn_size);

  w.token_embd = load.matrix(global.token_embd, vocab, hidden);
  const bool offset = c.norm_weights_offset_by_one;
  w.output_norm = load.norm(global.output_norm, hidden, offset);
  if (source.has(global.output)) {
    w.output = load.matrix(global.output, vocab, hidden);
  }
  c.tied_embeddings = w.output.empty();

  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const Names n = names_for(naming, c, l);
    LayerWeights& L = w.layers[l];
    const uint64_t q_rows = static_cast<uint64_t>(c.n_heads) * hd;
    const uint64_t kv_rows = static_cast<uint64_t>(c.n_kv_heads[l]) * hd;
    L.attn_norm = load.norm(n.attn_norm, hidden, offset);
    L.wqkv = !n.qkv.empty() && source.has(n.qkv)
                 ? load.matrix(n.qkv, q_rows + 2 * kv_rows, hidden)
                 : load.stacked({{n.q, q_rows}, {n.k, kv_rows}, {n.v, kv_rows}}, hidden);
    const bool has_bias = source.has(n.q_bias);
    if (c.attention_bias && !has_bias) {
      fail(ErrorCode::kNotFound, "{}: tensor '{}' is missing ({} has q/k/v biases)", source.file,
           n.q_bias, c.architecture);
    }
    if (has_bias) {
      L.bqkv.resize(static_cast<Eigen::Index>(q_rows + 2 * kv_rows));
      L.bqkv.segment(0, static_cast<Eigen::Index>(q_rows)) = load.vector(n.q_bias, q_rows);
      L.bqkv.segment(static_cast<Eigen::Index>(q_rows), static_cast<Eigen::Index>(kv_rows)) =
          load.vector(n.k_bias, kv_rows);
      L.bqkv.segment(static_cast<Eigen::Index>(q_rows + kv_rows),
                     static_cast<Eigen::Index>(kv_rows)) = load.vector(n.v_bias, kv_rows);
    }
    L.wo = load.matrix(n.o, hidden, q_rows);
    L.ffn_norm = load.norm(n.ffn_norm, hidden, offset);
    L.w_gate_up = !n.gate_up.empty() && source.has(n.gate_up)
                      ? load.matrix(n.gate_up, 2 * ffn, hidden)
                      : load.stacked({{n.gate, ffn}, {n.up, ffn}}, hidden);
    L.w_down = load.matrix(n.down, hidden, ffn);
    if (c.qk_norm) {
      L.q_norm = load.norm(n.q_norm, hd, offset);
      L.k_norm = load.norm(n.k_norm, hd, offset);
    }
    if (c.post_norms) {
      L.post_attn_norm = load.norm(n.post_attn_norm, hidden, offset);
      L.post_ffn_norm = load.norm(n.post_ffn_norm, hidden, offset);
    }
  }
}

}  // namespace kvplan
