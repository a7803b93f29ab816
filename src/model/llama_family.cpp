// Llama, Mistral, Qwen2 and SmolLM2: RMSNorm, GQA attention with RoPE (optional q/k/v bias),
// SwiGLU FFN, optionally tied embeddings. Only the tensor names differ between GGUF and HF.
// Gemma 3 (GGUF) adds per-head Q/K norms and post-attention/post-FFN norms.
#include "llama_family.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace kvplan {
namespace {

struct Names {
  std::string token_embd, output_norm, output;
  std::string attn_norm, q, k, v, o, q_bias, k_bias, v_bias, ffn_norm, gate, up, down;
  std::string q_norm, k_norm, post_attn_norm, post_ffn_norm;  // Gemma (GGUF names only)
};

Names names_for(TensorNaming naming, int layer) {
  const std::string n = std::to_string(layer);
  if (naming == TensorNaming::kGguf) {
    const std::string b = "blk." + n + ".";
    return {"token_embd.weight",       "output_norm.weight",     "output.weight",
            b + "attn_norm.weight",    b + "attn_q.weight",      b + "attn_k.weight",
            b + "attn_v.weight",       b + "attn_output.weight", b + "attn_q.bias",
            b + "attn_k.bias",         b + "attn_v.bias",        b + "ffn_norm.weight",
            b + "ffn_gate.weight",     b + "ffn_up.weight",      b + "ffn_down.weight",
            b + "attn_q_norm.weight",  b + "attn_k_norm.weight", b + "post_attention_norm.weight",
            b + "post_ffw_norm.weight"};
  }
  const std::string b = "model.layers." + n + ".";
  return {"model.embed_tokens.weight",
          "model.norm.weight",
          "lm_head.weight",
          b + "input_layernorm.weight",
          b + "self_attn.q_proj.weight",
          b + "self_attn.k_proj.weight",
          b + "self_attn.v_proj.weight",
          b + "self_attn.o_proj.weight",
          b + "self_attn.q_proj.bias",
          b + "self_attn.k_proj.bias",
          b + "self_attn.v_proj.bias",
          b + "post_attention_layernorm.weight",
          b + "mlp.gate_proj.weight",
          b + "mlp.up_proj.weight",
          b + "mlp.down_proj.weight",
          "",
          "",
          "",
          ""};
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
    return source_.read(name);
  }

  Vector vector(const std::string& name, uint64_t n) {
    const std::vector<float> v = read(name, {n});
    return Eigen::Map<const Vector>(v.data(), static_cast<Eigen::Index>(n));
  }

  RowMatrix matrix(const std::string& name, uint64_t rows, uint64_t cols) {
    const std::vector<float> v = read(name, {rows, cols});
    return Eigen::Map<const RowMatrix>(v.data(), static_cast<Eigen::Index>(rows),
                                       static_cast<Eigen::Index>(cols));
  }

  // Stacks matrices with the same column count vertically (fused projections).
  RowMatrix stacked(const std::vector<std::pair<std::string, uint64_t>>& parts, uint64_t cols) {
    uint64_t rows = 0;
    for (const auto& p : parts) rows += p.second;
    RowMatrix out(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
    Eigen::Index at = 0;
    for (const auto& [name, n] : parts) {
      const auto r = static_cast<Eigen::Index>(n);
      out.middleRows(at, r) = matrix(name, n, cols);
      at += r;
    }
    return out;
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
  if ((c.qk_norm || c.post_norms) && naming != TensorNaming::kGguf) {
    fail(ErrorCode::kUnimplemented, "{}: architecture '{}' is read from GGUF files only",
         source.file, c.architecture);
  }
  Loader load(source);
  const Names global = names_for(naming, 0);
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
    const Names l0 = names_for(naming, 0);
    if (source.has(l0.gate) && !source.shape(l0.gate).empty()) {
      c.ffn_size = dimension_as_int(source.shape(l0.gate)[0], source.file, l0.gate);
    }
  }
  const uint64_t ffn = static_cast<uint64_t>(c.ffn_size);

  w.token_embd = load.matrix(global.token_embd, vocab, hidden);
  w.output_norm = load.vector(global.output_norm, hidden);
  if (source.has(global.output)) {
    w.output = load.matrix(global.output, vocab, hidden);
  }
  c.tied_embeddings = w.output.size() == 0;

  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const Names n = names_for(naming, l);
    LayerWeights& L = w.layers[l];
    const uint64_t q_rows = static_cast<uint64_t>(c.n_heads) * hd;
    const uint64_t kv_rows = static_cast<uint64_t>(c.n_kv_heads[l]) * hd;
    L.attn_norm = load.vector(n.attn_norm, hidden);
    L.wqkv = load.stacked({{n.q, q_rows}, {n.k, kv_rows}, {n.v, kv_rows}}, hidden);
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
    L.ffn_norm = load.vector(n.ffn_norm, hidden);
    L.w_gate_up = load.stacked({{n.gate, ffn}, {n.up, ffn}}, hidden);
    L.w_down = load.matrix(n.down, hidden, ffn);
    if (c.qk_norm) {
      L.q_norm = load.vector(n.q_norm, hd);
      L.k_norm = load.vector(n.k_norm, hd);
    }
    if (c.post_norms) {
      L.post_attn_norm = load.vector(n.post_attn_norm, hidden);
      L.post_ffn_norm = load.vector(n.post_ffn_norm, hidden);
    }
  }
}

}  // namespace kvplan
