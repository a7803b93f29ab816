#include "model/model_weights.h"

#include <algorithm>

#include "core/error.h"
#include "core/hash.h"
#include "core/system_memory.h"
#include "model/gguf_file.h"
#include "model/llama_family.h"
#include "model/safetensors_file.h"
#include "model/tensor_dequant.h"

namespace kvplan {
namespace {

// GGUF files name the family's tensors llama.cpp's way; its converters fuse or rename some
// (Phi-3's attn_qkv and fused ffn_up), so the GGUF set is the one the harness reads and checks.
constexpr const char* kGgufArchitectures[] = {"llama", "mistral", "qwen2", "gemma3"};
constexpr const char* kHfArchitectures[] = {"llama", "mistral", "qwen2", "qwen3",
                                            "phi3",  "gemma2",  "gemma3"};

void require_supported(const ModelConfig& c, std::string_view file_format) {
  const std::string problem = harness_support_problem(c, file_format);
  if (!problem.empty()) fail(ErrorCode::kUnimplemented, "{}: {}", c.source, problem);
}

// The harness reads the weights in place from the mapped file(s): refuse, before reading any, a
// model whose weights exceed the memory there is, saying how much it needs.
void require_memory_for_weights(uint64_t bytes_needed, uint64_t elements,
                                const std::string& source) {
  const std::optional<uint64_t> available = available_memory_bytes();
  if (!available || bytes_needed <= *available) return;
  const auto bytes = [](uint64_t b) {
    constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;
    if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / kGiB);
    if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / kMiB);
    return fmt::format("{} B", b);
  };
  const std::string params =
      elements >= 1000000000 ? fmt::format("{:.2f} B", static_cast<double>(elements) / 1e9)
      : elements >= 1000000  ? fmt::format("{:.1f} M", static_cast<double>(elements) / 1e6)
                             : std::to_string(elements);
  fail(ErrorCode::kInvalidArgument,
       "{}: the harness keeps the weights in memory as stored: {} for {} parameters, more than "
       "the {} available ({})",
       source, bytes(bytes_needed), params, bytes(*available), available_memory_source());
}

std::optional<GgmlType> ggml_type_of(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kF32:
      return GgmlType::kF32;
    case SafetensorsDtype::kF16:
      return GgmlType::kF16;
    case SafetensorsDtype::kBF16:
      return GgmlType::kBF16;
  }
  return std::nullopt;
}

void finish(ModelWeights& w) {
  std::sort(w.tensors.begin(), w.tensors.end(),
            [](const TensorSummary& a, const TensorSummary& b) { return a.name < b.name; });
  w.fingerprint = model_fingerprint(w.config, w.tensors);
}

}  // namespace

std::string harness_support_problem(const ModelConfig& c, std::string_view file_format) {
  const bool gguf = file_format == "gguf";
  const auto begin = gguf ? std::begin(kGgufArchitectures) : std::begin(kHfArchitectures);
  const auto end = gguf ? std::end(kGgufArchitectures) : std::end(kHfArchitectures);
  if (std::find(begin, end, c.architecture) == end) {
    std::string names;
    for (auto it = begin; it != end; ++it) names += (names.empty() ? "" : ", ") + std::string(*it);
    return fmt::format(
        "architecture '{}' is not supported by the harness in {} files (supported: {})",
        c.architecture, gguf ? "GGUF" : "safetensors", names);
  }
  if (!c.unsupported_rope_scaling.empty()) {
    return fmt::format(
        "{} is not implemented by the harness (supported RoPE: plain, linear, llama3)",
        c.unsupported_rope_scaling);
  }
  return "";
}

size_t ModelWeights::n_parameters() const {
  size_t n = static_cast<size_t>(token_embd.size() + output_norm.size() + output.size());
  for (const LayerWeights& L : layers) {
    n += static_cast<size_t>(L.attn_norm.size() + L.wqkv.size() + L.bqkv.size() + L.wo.size() +
                             L.ffn_norm.size() + L.w_gate_up.size() + L.w_down.size() +
                             L.q_norm.size() + L.k_norm.size() + L.post_attn_norm.size() +
                             L.post_ffn_norm.size());
  }
  return n;
}

ModelWeights load_gguf_weights(std::shared_ptr<const GgufFile> file) {
  const GgufFile& gguf = *file;
  ModelWeights w;
  w.config = gguf_model_config(gguf);
  w.path = gguf.path();
  w.file_format = "gguf";
  require_supported(w.config, "gguf");
  for (const GgufTensorInfo& t : gguf.tensors()) {
    TensorSummary s{t.name, {t.dims.rbegin(), t.dims.rend()}, std::string(t.type->name), t.n_bytes};
    w.tensors.push_back(std::move(s));
    if (!can_dequantize(t.type->type)) {
      fail(ErrorCode::kUnimplemented,
           "{}: tensor '{}' has type {}, which kvplan cannot dequantize (supported: F32, F16, "
           "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
           gguf.path().string(), t.name, t.type->name);
    }
  }
  uint64_t elements = 0, bytes = 0;
  for (const GgufTensorInfo& t : gguf.tensors()) {
    elements += t.n_elements;
    bytes += t.n_bytes;
  }
  require_memory_for_weights(bytes, elements, gguf.path().string());
  TensorSource source;
  source.file = gguf.path().string();
  source.has = [&](const std::string& n) { return gguf.find_tensor(n) != nullptr; };
  source.shape = [&](const std::string& n) {
    const GgufTensorInfo& t = gguf.tensor(n);
    return std::vector<uint64_t>(t.dims.rbegin(), t.dims.rend());
  };
  source.read = [&](const std::string& n) { return dequantize_gguf_tensor(gguf, gguf.tensor(n)); };
  source.matrix = [&](const std::string& n, int64_t rows, int64_t cols) {
    const GgufTensorInfo& t = gguf.tensor(n);
    return WeightMatrix::borrowed(t.type->type, gguf.tensor_bytes(t), rows, cols, file,
                                  fmt::format("{}: tensor '{}'", gguf.path().string(), n));
  };
  load_llama_family(source, TensorNaming::kGguf, w);
  if (const GgufTensorInfo* f = gguf.find_tensor("rope_freqs.weight")) {
    if (f->n_elements != static_cast<uint64_t>(w.config.head_dim / 2)) {
      fail(ErrorCode::kInvalidArgument,
           "{}: tensor 'rope_freqs.weight' has {} values, expected "
           "head_dim/2 = {}",
           gguf.path().string(), f->n_elements, w.config.head_dim / 2);
    }
    w.rope_freq_factors = dequantize_gguf_tensor(gguf, *f);
  }
  finish(w);
  return w;
}

ModelWeights load_safetensors_weights(const std::filesystem::path& model_dir) {
  ModelWeights w;
  w.config = load_hf_config(model_dir);
  w.path = model_dir;
  w.file_format = "safetensors";
  require_supported(w.config, "safetensors");
  const auto shared_set = std::make_shared<const SafetensorsSet>(model_dir);
  const SafetensorsSet& set = *shared_set;
  for (const SafetensorsTensor* t : set.tensors()) {
    w.tensors.push_back({t->name, t->shape, t->dtype_name, t->bytes.size()});
  }
  uint64_t elements = 0, bytes = 0;
  for (const SafetensorsTensor* t : set.tensors()) {
    elements += t->n_elements();
    bytes += t->bytes.size();
  }
  require_memory_for_weights(bytes, elements, set.source().string());
  TensorSource source;
  source.file = set.source().string();
  source.has = [&](const std::string& n) { return set.find(n) != nullptr; };
  source.shape = [&](const std::string& n) { return set.tensor(n).shape; };
  source.read = [&](const std::string& n) { return set.to_f32(set.tensor(n)); };
  source.matrix = [&](const std::string& n, int64_t rows, int64_t cols) {
    const SafetensorsTensor& t = set.tensor(n);
    return WeightMatrix::borrowed(*ggml_type_of(t.dtype), t.bytes, rows, cols, shared_set,
                                  fmt::format("{}: tensor '{}'", t.file->string(), n));
  };
  load_llama_family(source, TensorNaming::kHf, w);
  finish(w);
  return w;
}

namespace {
bool is_hf_path(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) || path.extension() == ".safetensors" ||
         path.filename() == "config.json" || path.filename().string().ends_with(".index.json");
}
std::filesystem::path hf_dir(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) ? path : path.parent_path();
}
}  // namespace

ModelInfo read_model_info(const std::filesystem::path& path) {
  ModelInfo info;
  info.path = path;
  if (is_hf_path(path)) {
    info.file_format = "safetensors";
    info.config = load_hf_config(hf_dir(path));
    const SafetensorsSet set(hf_dir(path));
    for (const SafetensorsTensor* t : set.tensors()) {
      info.tensors.push_back({t->name, t->shape, t->dtype_name, t->bytes.size()});
    }
    if (const SafetensorsTensor* e = set.find("model.embed_tokens.weight");
        e && !e->shape.empty()) {
      info.config.vocab_size = dimension_as_int(e->shape[0], path.string(), e->name);
    }
    if (info.config.ffn_size <= 0) {
      if (const SafetensorsTensor* g = set.find("model.layers.0.mlp.gate_proj.weight");
          g && !g->shape.empty()) {
        info.config.ffn_size = dimension_as_int(g->shape[0], path.string(), g->name);
      }
    }
    info.config.tied_embeddings = set.find("lm_head.weight") == nullptr;
  } else {
    info.file_format = "gguf";
    const GgufFile gguf(path);
    info.config = gguf_model_config(gguf);
    for (const GgufTensorInfo& t : gguf.tensors()) {
      info.tensors.push_back(
          {t.name, {t.dims.rbegin(), t.dims.rend()}, std::string(t.type->name), t.n_bytes});
    }
    if (const GgufTensorInfo* e = gguf.find_tensor("token_embd.weight"); e && e->dims.size() == 2) {
      info.config.vocab_size = dimension_as_int(e->dims[1], path.string(), e->name);
    }
    if (info.config.ffn_size <= 0) {
      if (const GgufTensorInfo* g = gguf.find_tensor("blk.0.ffn_gate.weight");
          g && g->dims.size() == 2) {
        info.config.ffn_size = dimension_as_int(g->dims[1], path.string(), g->name);
      }
    }
    info.config.tied_embeddings = gguf.find_tensor("output.weight") == nullptr;
  }
  std::sort(info.tensors.begin(), info.tensors.end(),
            [](const TensorSummary& a, const TensorSummary& b) { return a.name < b.name; });
  info.fingerprint = model_fingerprint(info.config, info.tensors);
  return info;
}

ModelWeights load_model_weights(const std::filesystem::path& path) {
  if (is_hf_path(path)) return load_safetensors_weights(hf_dir(path));
  return load_gguf_weights(std::make_shared<const GgufFile>(path));
}

uint64_t model_fingerprint(const ModelConfig& c, const std::vector<TensorSummary>& tensors) {
  Hasher h;
  h.update("kvplan.model/v1").update(c.architecture);
  h.update_u64(static_cast<uint64_t>(c.n_layers)).update_u64(static_cast<uint64_t>(c.n_heads));
  for (int n : c.n_kv_heads) h.update_u64(static_cast<uint64_t>(n));
  h.update_u64(static_cast<uint64_t>(c.head_dim)).update_u64(static_cast<uint64_t>(c.hidden_size));
  h.update_u64(static_cast<uint64_t>(c.ffn_size)).update_u64(static_cast<uint64_t>(c.vocab_size));
  for (int64_t s : c.sliding_window) h.update_u64(static_cast<uint64_t>(s));
  h.update(fmt::format("{:.6g}/{:.6g}", c.rope_theta, c.rms_norm_eps));
  h.update_u64(static_cast<uint64_t>(c.rope_layout))
      .update_u64(static_cast<uint64_t>(c.rope_scaling));
  h.update(fmt::format("{:.6g}", c.rope_factor));
  // Absent from the fingerprints of models without caps, so theirs stay what they were.
  if (c.attn_logit_softcap > 0 || c.final_logit_softcap > 0) {
    h.update(fmt::format("softcap {:.6g}/{:.6g}", c.attn_logit_softcap, c.final_logit_softcap));
  }
  std::vector<const TensorSummary*> sorted;
  for (const TensorSummary& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (const TensorSummary* t : sorted) {
    h.update(t->name).update(t->type).update_u64(t->shape.size());
    for (uint64_t d : t->shape) h.update_u64(d);
  }
  return h.digest();
}

std::map<std::string, int> tensor_type_histogram(const std::vector<TensorSummary>& tensors) {
  std::map<std::string, int> out;
  for (const TensorSummary& t : tensors) ++out[t.type];
  return out;
}

TensorTotals tensor_totals(const std::vector<TensorSummary>& tensors) {
  TensorTotals totals;
  for (const TensorSummary& t : tensors) {
    uint64_t n = 1;
    for (const uint64_t d : t.shape) n *= d;
    totals.parameters += n;
    totals.bytes += t.bytes;
  }
  return totals;
}

KvModel kv_model(const ModelWeights& weights) {
  const ModelConfig& c = weights.config;
  return {c.name, c.architecture, hash_hex(weights.fingerprint), c.n_heads, kv_geometry(c)};
}

}  // namespace kvplan
