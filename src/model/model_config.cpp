#include "model/model_config.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_fields.h"
#include "core/json_text.h"
#include "model/gguf_file.h"
#include "model/gguf_sliding_window.h"

namespace kvplan {
namespace {

using nlohmann::json;

// Upper bounds on architecture counts: far above any real model (the largest have a few hundred
// layers, 128 heads, head_dim 512), low enough that per-layer vectors sized from a file stay small
// and every count fits an int.
constexpr int64_t kMaxLayers = 100000;  // plan.json's bound too
constexpr int64_t kMaxHeads = 1 << 16;
constexpr int64_t kMaxWidth = 1 << 24;  // hidden size, head_dim, FFN size
constexpr int64_t kMaxVocab = 1 << 24;

// An optional count (absent or null: 0) in 0..max. The type is checked before the range, so a
// string reads "expected a non-negative integer".
int optional_count(const JsonFields& f, const char* field, int64_t max) {
  const int64_t n = f.optional_integer(field, 0, INT64_MAX).value_or(0);
  if (n > max) f.expected(field, JsonFields::describe_integer(0, max), f.at(field));
  return static_cast<int>(n);
}

void refuse_unsupported_attention(const json& j, const std::string& source) {
  const JsonFields f(j, source);
  if (f.has("kv_lora_rank") || f.has("q_lora_rank")) {
    fail(ErrorCode::kUnimplemented,
         "{}: multi-head latent attention (kv_lora_rank) caches a compressed latent, not per-head "
         "K/V; kvplan does not support MLA models",
         source);
  }
  const std::string model_type = f.optional_string("model_type").value_or("");
  static const char* kHybrid[] = {
      "jamba",     "zamba",      "zamba2",          "mamba",      "mamba2",
      "falcon_h1", "qwen3_next", "recurrent_gemma", "nemotron_h", "granitemoehybrid",
      "bamba",     "lfm2",       "plamo2",          "minimax",    "minimax_text_01"};
  for (const char* h : kHybrid) {
    if (model_type == h) {
      fail(ErrorCode::kUnimplemented,
           "{}: model_type '{}' mixes attention with recurrent/linear-attention layers; kvplan "
           "supports pure-attention models only",
           source, model_type);
    }
  }
  for (const char* field : {"layer_types", "layers_block_type"}) {
    if (!j.contains(field) || !j[field].is_array()) continue;
    for (const json& t : j[field]) {
      const std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s != "full_attention" && s != "sliding_attention" && s != "attention") {
        fail(ErrorCode::kUnimplemented,
             "{}: field '{}' lists a '{}' layer; kvplan supports pure-attention models only",
             source, field, json_excerpt(t));
      }
    }
  }
}

std::vector<int64_t> hf_sliding_windows(const json& j, int n_layers, const std::string& source) {
  std::vector<int64_t> windows(n_layers, 0);
  const auto it = j.find("sliding_window");
  if (it == j.end() || it->is_null()) return windows;
  if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: field 'sliding_window': expected a positive integer or "
         "null, got {}",
         source, json_excerpt(*it));
  }
  const int64_t window = it->get<int64_t>();
  if (!JsonFields(j, source).optional_boolean("use_sliding_window").value_or(true)) return windows;
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const json& types = j["layer_types"];
    if (static_cast<int>(types.size()) != n_layers) {
      fail(ErrorCode::kInvalidArgument, "{}: field 'layer_types' has {} entries, expected {}",
           source, types.size(), n_layers);
    }
    for (int l = 0; l < n_layers; ++l) {
      if (types[l] == "sliding_attention") windows[l] = window;
    }
    return windows;
  }
  if (j.contains("sliding_window_pattern") && j["sliding_window_pattern"].is_number_integer()) {
    // Gemma 3: every pattern-th layer is global, the others slide.
    const int64_t pattern = j["sliding_window_pattern"].get<int64_t>();
    for (int l = 0; l < n_layers; ++l) {
      if (pattern <= 0 || (l + 1) % pattern != 0) windows[l] = window;
    }
    return windows;
  }
  if (j.contains("max_window_layers") && j["max_window_layers"].is_number_integer()) {
    // Qwen2: layers below max_window_layers use full attention.
    const int64_t full = std::max<int64_t>(j["max_window_layers"].get<int64_t>(), 0);
    for (int64_t l = full; l < n_layers; ++l) windows[l] = window;
    return windows;
  }
  if (j.contains("model_type") && j["model_type"] == "gemma2") {  // a comparison never throws
    // Gemma 2 configs written before layer_types: even layers slide, odd ones are global.
    for (int l = 0; l < n_layers; l += 2) windows[l] = window;
    return windows;
  }
  std::fill(windows.begin(), windows.end(), window);
  return windows;
}

constexpr int64_t kMaxContext = int64_t{1} << 31;  // fits the int64 fields and an int window

// A GGUF count that must be a whole number in 0..max (get_uint refuses the rest).
int64_t gguf_count(const GgufFile& gguf, const std::string& key, int64_t max) {
  const uint64_t n = gguf.get_uint(key);
  if (n > static_cast<uint64_t>(max)) {
    fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' = {}: expected at most {}",
         gguf.path().string(), key, n, max);
  }
  return static_cast<int64_t>(n);
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// One RoPE description, as config.json's rope_scaling (transformers 4) or an entry of
// rope_parameters (transformers 5, which moves rope_theta into it) gives it.
void apply_rope_entry(const JsonFields& rs, ModelConfig& c) {
  if (const auto theta = rs.optional_number("rope_theta", 0.0)) c.rope_theta = *theta;
  const std::string type =
      rs.optional_string("rope_type").value_or(rs.optional_string("type").value_or(""));
  if (type == "llama3") {
    c.rope_scaling = RopeScaling::kLlama3;
    c.rope_factor = rs.optional_number("factor").value_or(8.0);
    c.rope_low_freq_factor = rs.optional_number("low_freq_factor").value_or(1.0);
    c.rope_high_freq_factor = rs.optional_number("high_freq_factor").value_or(4.0);
    c.rope_original_context =
        rs.optional_integer("original_max_position_embeddings", 0, INT64_MAX).value_or(8192);
  } else if (type == "linear") {
    c.rope_scaling = RopeScaling::kLinear;
    c.rope_factor = rs.optional_number("factor").value_or(1.0);
  } else if (!type.empty() && type != "default") {
    c.unsupported_rope_scaling = "RoPE type '" + type + "'";
  }
  if (const double partial = rs.optional_number("partial_rotary_factor").value_or(1.0);
      partial != 1.0) {
    c.unsupported_rope_scaling = fmt::format("partial_rotary_factor {}", partial);
  }
}

// What HF's modeling files for each family do beyond the Llama block (transformers'
// models/<family>/modeling_<family>.py).
void apply_family_conventions(const JsonFields& f, ModelConfig& c) {
  if (c.architecture == "gemma3_text") c.architecture = "gemma3";
  if (c.architecture == "qwen3") c.qk_norm = true;  // plain RMS norms over each Q and K head
  if (c.architecture != "gemma2" && c.architecture != "gemma3") return;
  c.post_norms = true;
  c.qk_norm = c.architecture == "gemma3";
  c.norm_weights_offset_by_one = true;
  c.ffn_activation = FfnActivation::kGeluTanh;
  // The normalizer is hidden_size ** 0.5 cast to the activations' dtype (f32 here).
  c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  const double scalar = f.optional_number("query_pre_attn_scalar", 0.0).value_or(c.head_dim);
  c.attention_scale = 1.0 / std::sqrt(scalar > 0 ? scalar : static_cast<double>(c.head_dim));
  c.attn_logit_softcap = f.optional_number("attn_logit_softcapping", 0.0).value_or(0.0);
  c.final_logit_softcap = f.optional_number("final_logit_softcapping", 0.0).value_or(0.0);
  if (c.architecture == "gemma3" && c.rope_theta_sliding == 0) {
    c.rope_theta_sliding = f.optional_number("rope_local_base_freq", 0.0).value_or(10000.0);
  }
}

}  // namespace

ModelConfig hf_config_from_json(const json& root, const std::string& source) {
  if (!root.is_object()) {
    fail(ErrorCode::kInvalidArgument, "{}: expected a JSON object at the top level", source);
  }
  // Multimodal configs nest the language model under text_config.
  const json& j =
      root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
  refuse_unsupported_attention(j, source);
  ModelConfig c;
  c.source = source;
  // Fields of the language model (text_config when nested) and of the file's top level; errors
  // name both by their key alone, as the model's config.json documents them.
  const JsonFields f(j, source);
  const JsonFields top(root, source);
  c.architecture = lowercase(f.optional_string("model_type")
                                 .value_or(top.optional_string("model_type").value_or("llama")));
  c.name = top.optional_string("_name_or_path").value_or(c.architecture);
  c.n_layers = static_cast<int>(f.integer("num_hidden_layers", 1, kMaxLayers));
  c.n_heads = static_cast<int>(f.integer("num_attention_heads", 1, kMaxHeads));
  c.hidden_size = static_cast<int>(f.integer("hidden_size", 1, kMaxWidth));
  if (f.has("head_dim")) {
    c.head_dim = static_cast<int>(f.integer("head_dim", 1, kMaxWidth));
  } else {
    if (c.hidden_size % c.n_heads != 0) {
      fail(ErrorCode::kInvalidArgument,
           "{}: hidden_size {} is not divisible by "
           "num_attention_heads {} and no head_dim is given",
           source, c.hidden_size, c.n_heads);
    }
    c.head_dim = c.hidden_size / c.n_heads;
  }
  const auto kv = j.find("num_key_value_heads");
  if (kv == j.end() || kv->is_null()) {
    c.n_kv_heads.assign(c.n_layers, c.n_heads);
  } else if (kv->is_array()) {
    if (static_cast<int>(kv->size()) != c.n_layers) {
      fail(ErrorCode::kInvalidArgument,
           "{}: field 'num_key_value_heads' lists {} layers, "
           "expected num_hidden_layers = {}",
           source, kv->size(), c.n_layers);
    }
    for (const json& n : *kv) {
      if (!n.is_number_integer() || n.get<int64_t>() <= 0 || n.get<int64_t>() > kMaxHeads) {
        fail(ErrorCode::kInvalidArgument,
             "{}: field 'num_key_value_heads': expected integers in 1..{}, got {}", source,
             kMaxHeads, json_excerpt(n));
      }
      c.n_kv_heads.push_back(n.get<int>());
    }
  } else {
    c.n_kv_heads.assign(c.n_layers,
                        static_cast<int>(f.integer("num_key_value_heads", 1, kMaxHeads)));
  }
  for (int n : c.n_kv_heads) {
    if (c.n_heads % n != 0) {
      fail(ErrorCode::kInvalidArgument,
           "{}: num_attention_heads {} is not a multiple of "
           "num_key_value_heads {}",
           source, c.n_heads, n);
    }
  }
  c.sliding_window = hf_sliding_windows(j, c.n_layers, source);
  c.ffn_size = optional_count(f, "intermediate_size", kMaxWidth);
  c.vocab_size = optional_count(f, "vocab_size", kMaxVocab);
  c.context_length = f.optional_integer("max_position_embeddings", 0, INT64_MAX).value_or(0);
  c.rope_theta = f.optional_number("rope_theta").value_or(10000.0);
  c.rms_norm_eps = f.optional_number("rms_norm_eps").value_or(1e-5);
  c.attention_bias = f.optional_boolean("attention_bias").value_or(c.architecture == "qwen2");
  c.tied_embeddings = top.optional_boolean("tie_word_embeddings").value_or(false);
  c.rope_layout = RopeLayout::kHalfSplit;
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    apply_rope_entry(JsonFields(j["rope_scaling"], source + ": rope_scaling"), c);
  }
  // transformers 5 writes rope_parameters: one entry, or one per layer type.
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    if (rp.contains("full_attention") || rp.contains("sliding_attention")) {
      if (rp.contains("full_attention") && rp["full_attention"].is_object()) {
        apply_rope_entry(
            JsonFields(rp["full_attention"], source + ": rope_parameters.full_attention"), c);
      }
      if (rp.contains("sliding_attention") && rp["sliding_attention"].is_object()) {
        ModelConfig sliding;
        apply_rope_entry(
            JsonFields(rp["sliding_attention"], source + ": rope_parameters.sliding_attention"),
            sliding);
        c.rope_theta_sliding = sliding.rope_theta;
        if (sliding.rope_scaling != RopeScaling::kNone) {
          c.unsupported_rope_scaling = "a scaled RoPE on the sliding-window layers";
        }
        if (!sliding.unsupported_rope_scaling.empty()) {
          c.unsupported_rope_scaling = sliding.unsupported_rope_scaling;
        }
      }
    } else {
      apply_rope_entry(JsonFields(rp, source + ": rope_parameters"), c);
    }
  }
  if (const double partial = f.optional_number("partial_rotary_factor").value_or(1.0);
      partial != 1.0) {
    c.unsupported_rope_scaling = fmt::format("partial_rotary_factor {}", partial);
  }
  apply_family_conventions(f, c);
  return c;
}

ModelConfig hf_config_from_text(std::string_view text, const std::string& source) {
  const json j = parse_json_text(text, source);
  ModelConfig c = hf_config_from_json(j, source);
  if (j.is_object() && !j.contains("_name_or_path")) {
    const std::filesystem::path file(source);
    c.name = file.has_parent_path() ? file.parent_path().filename().string() : c.architecture;
    c.name = JsonFields(j, source).optional_string("kvplan_name").value_or(c.name);
  }
  return c;
}

ModelConfig load_hf_config(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path)) file = path / "config.json";
  return hf_config_from_text(read_text_file(file), file.string());
}

ModelConfig gguf_model_config(const GgufFile& gguf) {
  ModelConfig c;
  c.source = gguf.path().string();
  c.architecture = gguf.get_string("general.architecture");
  const std::string& a = c.architecture;
  if (gguf.has(a + ".attention.kv_lora_rank")) {
    fail(ErrorCode::kUnimplemented,
         "{}: architecture '{}' uses multi-head latent attention; "
         "kvplan does not support MLA models",
         c.source, a);
  }
  if (gguf.has(a + ".ssm.state_size") || gguf.has(a + ".ssm.conv_kernel")) {
    fail(ErrorCode::kUnimplemented,
         "{}: architecture '{}' has recurrent (SSM) layers; kvplan "
         "supports pure-attention models only",
         c.source, a);
  }
  c.name = gguf.find_string("general.name").value_or(gguf.path().stem().string());
  c.n_layers = static_cast<int>(gguf_count(gguf, a + ".block_count", kMaxLayers));
  c.n_heads = static_cast<int>(gguf_count(gguf, a + ".attention.head_count", kMaxHeads));
  c.hidden_size = static_cast<int>(gguf_count(gguf, a + ".embedding_length", kMaxWidth));
  if (c.n_layers <= 0 || c.n_heads <= 0 || c.hidden_size <= 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: block_count, head_count and embedding_length must be "
         "positive",
         c.source);
  }
  c.head_dim = c.hidden_size / c.n_heads;
  if (gguf.has(a + ".attention.key_length")) {
    c.head_dim = static_cast<int>(gguf_count(gguf, a + ".attention.key_length", kMaxWidth));
  }
  if (auto v = gguf.find_number(a + ".attention.value_length"); v && *v != c.head_dim) {
    fail(ErrorCode::kUnimplemented,
         "{}: key_length {} differs from value_length {}; kvplan needs "
         "equal K and V head sizes",
         c.source, c.head_dim, *v);
  }
  const std::string kv_key = a + ".attention.head_count_kv";
  if (const GgufValue* kv = gguf.find(kv_key); kv != nullptr && kv->is_array()) {
    if (static_cast<int>(kv->numbers.size()) != c.n_layers) {
      fail(ErrorCode::kInvalidArgument, "{}: '{}' lists {} layers, expected {}", c.source, kv_key,
           kv->numbers.size(), c.n_layers);
    }
    for (double n : kv->numbers) {
      if (!(n >= 0 && n <= kMaxHeads)) {
        fail(ErrorCode::kInvalidArgument, "{}: '{}' lists {}: expected counts in 0..{}", c.source,
             kv_key, n, kMaxHeads);
      }
      c.n_kv_heads.push_back(static_cast<int>(n));
    }
  } else {
    c.n_kv_heads.assign(c.n_layers, gguf.has(kv_key)
                                        ? static_cast<int>(gguf_count(gguf, kv_key, kMaxHeads))
                                        : c.n_heads);
  }
  for (int n : c.n_kv_heads) {
    if (n <= 0 || c.n_heads % n != 0) {
      fail(ErrorCode::kInvalidArgument, "{}: '{}' = {} must divide head_count {}", c.source, kv_key,
           n, c.n_heads);
    }
  }
  c.sliding_window = gguf_sliding_windows(gguf, a, c.n_layers, kMaxContext);
  const std::string ffn_key = a + ".feed_forward_length";
  c.ffn_size = gguf.has(ffn_key) ? static_cast<int>(gguf_count(gguf, ffn_key, kMaxWidth)) : 0;
  const std::string ctx_key = a + ".context_length";
  c.context_length = gguf.has(ctx_key) ? gguf_count(gguf, ctx_key, kMaxContext) : 0;
  c.rope_theta = gguf.find_number(a + ".rope.freq_base").value_or(10000.0);
  c.rms_norm_eps = gguf.find_number(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  if (const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    c.vocab_size = static_cast<int>(tokens->strings.size());
  }
  if (gguf.has(a + ".vocab_size"))
    c.vocab_size = static_cast<int>(gguf_count(gguf, a + ".vocab_size", kMaxVocab));
  // llama.cpp's converter permutes Q/K weights of llama-family models so that "normal" RoPE
  // (adjacent pairs) is correct; qwen2 and others keep HF order and use NEOX (half split).
  c.rope_layout =
      (a == "llama" || a == "mistral") ? RopeLayout::kAdjacentPairs : RopeLayout::kHalfSplit;
  c.attention_bias = (a == "qwen2");
  if (a == "gemma3") {
    // llama.cpp's gemma3 loader and graph (src/llama-model.cpp, src/models/gemma3.cpp): its
    // converter already stores every norm weight as 1 + w, so plain RMS norms apply them.
    c.qk_norm = true;
    c.post_norms = true;
    c.ffn_activation = FfnActivation::kGeluTanh;
    c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));  // f32, as ggml scales
    // Gemma 3 27B (62 layers) scales queries by 1/sqrt(hidden / heads), the others by
    // 1/sqrt(head_dim) (gemma_pytorch's query_pre_attn_scalar).
    c.attention_scale = c.n_layers == 62
                            ? 1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.n_heads))
                            : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    c.rope_theta_sliding = gguf.find_number(a + ".rope.freq_base_swa").value_or(10000.0);
  }
  if (auto scale = gguf.find_number(a + ".rope.scaling.factor"); scale && *scale > 0) {
    const std::string type = gguf.find_string(a + ".rope.scaling.type").value_or("linear");
    if (type == "linear") {
      c.rope_scaling = RopeScaling::kLinear;
      c.rope_factor = *scale;
    }
  }
  return c;
}

KvGeometry kv_geometry(const ModelConfig& config) {
  KvGeometry g;
  g.model_name = config.name;
  for (size_t l = 0; l < static_cast<size_t>(config.n_layers); ++l) {
    g.layers.push_back({config.n_kv_heads[l], config.head_dim, config.sliding_window[l]});
  }
  return g;
}

ModelConfig load_model_config(const std::string& spec, const std::filesystem::path& presets_dir) {
  const std::filesystem::path path(spec);
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    if (path.extension() == ".gguf") {
      GgufFile gguf(path, GgufReadOptions{.metadata_only = true});
      return gguf_model_config(gguf);
    }
    return load_hf_config(path);
  }
  const std::filesystem::path preset = presets_dir / (spec + ".json");
  if (std::filesystem::exists(preset, ec)) {
    ModelConfig c = load_hf_config(preset);
    c.name = spec;
    return c;
  }
  std::string names;
  if (std::filesystem::is_directory(presets_dir, ec)) {
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(presets_dir, ec)) {
      if (e.path().extension() == ".json") found.push_back(e.path().stem().string());
    }
    std::sort(found.begin(), found.end());
    for (const auto& n : found) names += (names.empty() ? "" : ", ") + n;
  }
  fail(ErrorCode::kNotFound, "--model '{}': no such file, directory or preset (presets in {}: {})",
       spec, presets_dir.string(), names.empty() ? "none" : names);
}

}  // namespace kvplan
