#include "model/model_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "model/gguf_file.h"

namespace kvplan {
namespace {

using nlohmann::json;

int positive_int(const json& j, const char* field, const std::string& source) {
  const auto it = j.find(field);
  if (it == j.end()) fail(ErrorCode::kInvalidArgument, "{}: field '{}' is missing", source, field);
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (1 << 30)) {
    fail(ErrorCode::kInvalidArgument, "{}: field '{}': expected a positive integer, got {}", source,
         field, it->dump());
  }
  return it->get<int>();
}

bool has_non_null(const json& j, const char* field) {
  const auto it = j.find(field);
  return it != j.end() && !it->is_null();
}

void refuse_unsupported_attention(const json& j, const std::string& source) {
  if (has_non_null(j, "kv_lora_rank") || has_non_null(j, "q_lora_rank")) {
    fail(ErrorCode::kUnimplemented,
         "{}: multi-head latent attention (kv_lora_rank) caches a compressed latent, not per-head "
         "K/V; kvplan does not support MLA models",
         source);
  }
  const std::string model_type = j.value("model_type", "");
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
             source, field, t.dump());
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
         source, it->dump());
  }
  const int64_t window = it->get<int64_t>();
  if (j.contains("use_sliding_window") && !j.value("use_sliding_window", true)) return windows;
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
    const int pattern = j["sliding_window_pattern"].get<int>();
    for (int l = 0; l < n_layers; ++l) {
      if (pattern <= 0 || (l + 1) % pattern != 0) windows[l] = window;
    }
    return windows;
  }
  if (j.contains("max_window_layers") && j["max_window_layers"].is_number_integer()) {
    // Qwen2: layers below max_window_layers use full attention.
    const int full = j["max_window_layers"].get<int>();
    for (int l = full; l < n_layers; ++l) windows[l] = window;
    return windows;
  }
  std::fill(windows.begin(), windows.end(), window);
  return windows;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
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
  c.architecture = lowercase(j.value("model_type", root.value("model_type", std::string("llama"))));
  c.name = root.value("_name_or_path", c.architecture);
  c.n_layers = positive_int(j, "num_hidden_layers", source);
  c.n_heads = positive_int(j, "num_attention_heads", source);
  c.hidden_size = positive_int(j, "hidden_size", source);
  if (has_non_null(j, "head_dim")) {
    c.head_dim = positive_int(j, "head_dim", source);
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
      if (!n.is_number_integer() || n.get<int>() <= 0) {
        fail(ErrorCode::kInvalidArgument,
             "{}: field 'num_key_value_heads': expected positive "
             "integers, got {}",
             source, n.dump());
      }
      c.n_kv_heads.push_back(n.get<int>());
    }
  } else {
    c.n_kv_heads.assign(c.n_layers, positive_int(j, "num_key_value_heads", source));
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
  c.ffn_size = j.value("intermediate_size", 0);
  c.vocab_size = j.value("vocab_size", 0);
  c.context_length = j.value("max_position_embeddings", int64_t{0});
  c.rope_theta = j.value("rope_theta", 10000.0);
  c.rms_norm_eps = j.value("rms_norm_eps", 1e-5);
  c.attention_bias = j.value("attention_bias", c.architecture == "qwen2");
  c.tied_embeddings = root.value("tie_word_embeddings", false);
  c.rope_layout = RopeLayout::kHalfSplit;
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const json& rs = j["rope_scaling"];
    const std::string type = rs.value("rope_type", rs.value("type", std::string()));
    if (type == "llama3") {
      c.rope_scaling = RopeScaling::kLlama3;
      c.rope_factor = rs.value("factor", 8.0);
      c.rope_low_freq_factor = rs.value("low_freq_factor", 1.0);
      c.rope_high_freq_factor = rs.value("high_freq_factor", 4.0);
      c.rope_original_context = rs.value("original_max_position_embeddings", int64_t{8192});
    } else if (type == "linear") {
      c.rope_scaling = RopeScaling::kLinear;
      c.rope_factor = rs.value("factor", 1.0);
    }
  }
  return c;
}

ModelConfig load_hf_config(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path)) file = path / "config.json";
  const std::string text = read_text_file(file);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    fail(ErrorCode::kInvalidArgument, "{}: not valid JSON", file.string());
  }
  ModelConfig c = hf_config_from_json(j, file.string());
  if (!j.contains("_name_or_path")) {
    c.name = file.has_parent_path() ? file.parent_path().filename().string() : c.architecture;
    if (j.contains("kvplan_name")) c.name = j.value("kvplan_name", c.name);
  }
  return c;
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
  c.n_layers = static_cast<int>(gguf.get_uint(a + ".block_count"));
  c.n_heads = static_cast<int>(gguf.get_uint(a + ".attention.head_count"));
  c.hidden_size = static_cast<int>(gguf.get_uint(a + ".embedding_length"));
  if (c.n_layers <= 0 || c.n_heads <= 0 || c.hidden_size <= 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: block_count, head_count and embedding_length must be "
         "positive",
         c.source);
  }
  c.head_dim = c.hidden_size / c.n_heads;
  if (auto k = gguf.find_number(a + ".attention.key_length")) c.head_dim = static_cast<int>(*k);
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
    for (double n : kv->numbers) c.n_kv_heads.push_back(static_cast<int>(n));
  } else {
    c.n_kv_heads.assign(c.n_layers, static_cast<int>(gguf.find_number(kv_key).value_or(c.n_heads)));
  }
  for (int n : c.n_kv_heads) {
    if (n <= 0 || c.n_heads % n != 0) {
      fail(ErrorCode::kInvalidArgument, "{}: '{}' = {} must divide head_count {}", c.source, kv_key,
           n, c.n_heads);
    }
  }
  c.sliding_window.assign(c.n_layers, 0);
  if (auto w = gguf.find_number(a + ".attention.sliding_window"); w && *w > 0) {
    std::fill(c.sliding_window.begin(), c.sliding_window.end(), static_cast<int64_t>(*w));
  }
  c.ffn_size = static_cast<int>(gguf.find_number(a + ".feed_forward_length").value_or(0));
  c.context_length = static_cast<int64_t>(gguf.find_number(a + ".context_length").value_or(0));
  c.rope_theta = gguf.find_number(a + ".rope.freq_base").value_or(10000.0);
  c.rms_norm_eps = gguf.find_number(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  if (const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    c.vocab_size = static_cast<int>(tokens->strings.size());
  }
  c.vocab_size = static_cast<int>(gguf.find_number(a + ".vocab_size").value_or(c.vocab_size));
  // llama.cpp's converter permutes Q/K weights of llama-family models so that "normal" RoPE
  // (adjacent pairs) is correct; qwen2 and others keep HF order and use NEOX (half split).
  c.rope_layout =
      (a == "llama" || a == "mistral") ? RopeLayout::kAdjacentPairs : RopeLayout::kHalfSplit;
  c.attention_bias = (a == "qwen2");
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
