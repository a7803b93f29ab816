#include "plan/plan.h"

#include <cmath>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_fields.h"
#include "core/json_text.h"
#include "formats/kv_bytes.h"

namespace kvplan {
namespace {

using nlohmann::json;

KvPair parse_pair_at(const std::string& key_name, const std::string& value_name,
                     const std::string& where) {
  try {
    const Format key = Format::parse(key_name);
    const Format value = Format::parse(value_name);
    if (key.is_slot() != value.is_slot() || (key.is_slot() && key != value)) {
      fail(ErrorCode::kInvalidArgument,
           "a slot covers K and V together: key and value must be "
           "the same slot:N");
    }
    return {key, value};
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "{}: {}", where, e.what());
  }
}

}  // namespace

std::vector<KvPair> Plan::pairs() const {
  std::vector<KvPair> out;
  out.reserve(layers.size());
  for (const PlanLayer& l : layers) out.push_back(l.pair);
  return out;
}

std::vector<KvHeadScales> Plan::fp8_scales() const {
  std::vector<KvHeadScales> out;
  out.reserve(layers.size());
  for (const PlanLayer& l : layers) out.push_back(l.fp8_scales);
  return out;
}

PlanSummary summarize_plan(const Plan& plan) {
  PlanSummary s;
  const KvGeometry& g = plan.model.geometry;
  QuantSettings bf16_settings = plan.quantization;
  bf16_settings.mode = QuantMode::kPerToken;
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const KvLayerGeometry& lg = g.layers[l];
    s.equivalent_bits += plan.layers[l].pair.nominal_bits(lg.head_dim);
    s.bytes_per_token +=
        layer_bytes_per_token(lg, plan.layers[l].pair, plan.quantization, static_cast<int>(l))
            .total();
    s.bf16_bytes_per_token +=
        layer_bytes_per_token(lg, KvPair::parse("KV16"), bf16_settings, static_cast<int>(l))
            .total();
  }
  const double values_per_token = kv_values_per_token(g);
  if (!plan.layers.empty()) s.equivalent_bits /= static_cast<double>(plan.layers.size());
  if (values_per_token > 0) s.effective_bits = 8.0 * s.bytes_per_token / values_per_token;
  if (s.bytes_per_token > 0) s.compression_ratio = s.bf16_bytes_per_token / s.bytes_per_token;
  return s;
}

// Errors name the file, then the object ("plan.json: layers[1]: field 'group': ..."): each object
// below is read as its own JsonFields rooted at that prefix.
Plan plan_from_json(const json& j, const std::string& source) {
  const JsonFields root(j, source);
  if (!j.is_object()) root.expected("a JSON object");
  const std::string schema = root.string("schema");
  if (schema != kPlanSchema && schema != kPlanSchemaV1) {
    fail(ErrorCode::kInvalidArgument, "{}: field 'schema' is '{}', expected '{}' (or '{}')", source,
         schema, kPlanSchema, kPlanSchemaV1);
  }
  Plan plan;
  plan.tool_version = root.string("tool_version");
  plan.created = root.string("created");

  const JsonFields m(root.at("model"), source + ": model");
  if (!m.value().is_object()) m.expected("an object");
  plan.model.name = m.string("name");
  plan.model.architecture = m.string("architecture");
  plan.model.fingerprint = m.string("fingerprint");
  const int n_layers = static_cast<int>(m.integer("num_layers", 1, 100000));
  plan.model.n_attention_heads = static_cast<int>(m.integer("num_attention_heads", 1, 1 << 20));
  const int head_dim = static_cast<int>(m.integer("head_dim", 1, 1 << 16));
  plan.model.geometry.model_name = plan.model.name;
  plan.model.geometry.layers.assign(n_layers, {0, head_dim, 0});
  if (m.at("num_kv_heads").is_array()) {
    const JsonFields kv = m.array("num_kv_heads");
    if (static_cast<int>(kv.size()) != n_layers) {
      m.invalid("num_kv_heads", fmt::format("lists {} layers, expected {}", kv.size(), n_layers));
    }
    for (int l = 0; l < n_layers; ++l) {
      plan.model.geometry.layers[l].n_kv_heads = static_cast<int>(kv.integer_at(l, 1, 1 << 20));
    }
  } else {
    const int n = static_cast<int>(m.integer("num_kv_heads", 1, 1 << 20));
    for (auto& lg : plan.model.geometry.layers) lg.n_kv_heads = n;
  }
  // Older plans may hold anything but an array here; only a per-layer array is read.
  if (m.has("sliding_window") && m.at("sliding_window").is_array()) {
    const json& w = m.at("sliding_window");
    if (static_cast<int>(w.size()) != n_layers) {
      m.invalid("sliding_window", fmt::format("lists {} layers, expected {}", w.size(), n_layers));
    }
    for (int l = 0; l < n_layers; ++l) {
      plan.model.geometry.layers[l].sliding_window =
          w[l].is_number_integer() ? w[l].get<int64_t>() : 0;
    }
  }

  const JsonFields q(root.at("quantization"), source + ": quantization");
  plan.quantization.mode = [&, mode = q.string("mode")] {
    try {
      return parse_quant_mode(mode);
    } catch (const Error& e) {
      q.invalid(e.what());
    }
  }();
  plan.quantization.group_size = static_cast<size_t>(q.integer("group_size", 1, 4096));
  plan.quantization.residual_length = static_cast<size_t>(q.integer("residual_length", 0, 1 << 20));
  plan.quantization.block_size = static_cast<size_t>(q.integer("block_size", 1, 1 << 20));
  if (const auto dtype = q.optional_string("scale_dtype")) plan.scale_dtype = *dtype;
  try {
    plan.quantization.validate();
  } catch (const Error& e) {
    q.invalid(e.what());
  }

  const json& layers = root.at("layers");
  if (!layers.is_array() || static_cast<int>(layers.size()) != n_layers) {
    root.invalid("layers", fmt::format("expected an array of num_layers = {} entries, got {}",
                                       n_layers, layers.is_array() ? layers.size() : 0));
  }
  for (int l = 0; l < n_layers; ++l) {
    const JsonFields e(layers[l], fmt::format("{}: layers[{}]", source, l));
    if (!e.value().is_object()) e.expected("an object");
    PlanLayer layer;
    layer.index = static_cast<int>(e.integer("index", l, l));
    layer.group = static_cast<int>(e.optional_integer("group", 0, n_layers).value_or(0));
    layer.pair = parse_pair_at(e.string("key"), e.string("value"), e.source());
    // Sizes written in the file must agree with what the formats say.
    const LayerTokenBytes bytes = [&] {
      try {
        return layer_bytes_per_token(plan.model.geometry.layers[l], layer.pair, plan.quantization,
                                     l);
      } catch (const Error& err) {
        fail(ErrorCode::kInvalidArgument, "{}: {}", source, err.what());
      }
    }();
    for (auto [field, scales] : {std::pair{"key_fp8_scales", &layer.fp8_scales.key},
                                 std::pair{"value_fp8_scales", &layer.fp8_scales.value}}) {
      const auto values = e.optional_array(field);
      if (!values) continue;
      for (size_t i = 0; i < values->size(); ++i) {
        scales->push_back(static_cast<float>(values->number_at(i)));
      }
    }
    check_fp8_scales(layer.fp8_scales, layer.pair,
                     plan.model.geometry.layers[static_cast<size_t>(l)].n_kv_heads, e.source());
    for (const auto& [field, expected] : {std::pair{"key_bytes_per_token", bytes.key},
                                          std::pair{"value_bytes_per_token", bytes.value}}) {
      if (!e.has(field)) continue;
      const json& v = e.at(field);
      if (!v.is_number() || std::fabs(v.get<double>() - expected) > 1e-6) {
        fail(ErrorCode::kInvalidArgument, "{}: field '{}' is {}, but {} gives {}", e.source(),
             field, json_excerpt(v), layer.pair.name(), expected);
      }
    }
    plan.layers.push_back(layer);
  }
  plan.results = results_from_json(j, source);
  const size_t weights = plan.results.provenance.surrogate_weights.size();
  if (weights != 0 && weights != plan.layers.size()) {
    fail(ErrorCode::kInvalidArgument,
         "{}: field 'provenance.surrogate_weights': {} weights, expected one per layer ({})",
         source, weights, plan.layers.size());
  }
  return plan;
}

Plan plan_from_text(std::string_view text, const std::string& source) {
  return plan_from_json(parse_json_text(text, source), source);
}

Plan read_plan(const std::filesystem::path& path) {
  return plan_from_text(read_text_file(path), path.string());
}

json plan_to_json(const Plan& plan) {
  const KvGeometry& g = plan.model.geometry;
  json kv_heads = json::array();
  json windows = json::array();
  bool uniform_heads = true, any_window = false;
  for (const KvLayerGeometry& lg : g.layers) {
    kv_heads.push_back(lg.n_kv_heads);
    windows.push_back(lg.sliding_window);
    uniform_heads = uniform_heads && lg.n_kv_heads == g.layers.front().n_kv_heads;
    any_window = any_window || lg.sliding_window > 0;
  }
  json model = {{"name", plan.model.name},
                {"architecture", plan.model.architecture},
                {"fingerprint", plan.model.fingerprint},
                {"num_layers", g.n_layers()},
                {"num_attention_heads", plan.model.n_attention_heads},
                {"num_kv_heads",
                 uniform_heads && !g.layers.empty() ? json(g.layers.front().n_kv_heads) : kv_heads},
                {"head_dim", g.layers.empty() ? 0 : g.layers.front().head_dim}};
  if (any_window) model["sliding_window"] = windows;
  json layers = json::array();
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const PlanLayer& layer = plan.layers[l];
    const LayerTokenBytes b =
        layer_bytes_per_token(g.layers[l], layer.pair, plan.quantization, static_cast<int>(l));
    json entry = {{"index", layer.index},         {"group", layer.group},
                  {"key", layer.pair.key.name()}, {"value", layer.pair.value.name()},
                  {"key_bytes_per_token", b.key}, {"value_bytes_per_token", b.value}};
    if (!layer.fp8_scales.key.empty()) entry["key_fp8_scales"] = layer.fp8_scales.key;
    if (!layer.fp8_scales.value.empty()) entry["value_fp8_scales"] = layer.fp8_scales.value;
    layers.push_back(std::move(entry));
  }
  const PlanSummary s = summarize_plan(plan);
  json out = {{"schema", kPlanSchema},
              {"tool_version", plan.tool_version},
              {"created", plan.created},
              {"model", model},
              {"quantization",
               {{"mode", quant_mode_name(plan.quantization.mode)},
                {"group_size", plan.quantization.group_size},
                {"residual_length", plan.quantization.residual_length},
                {"block_size", plan.quantization.block_size},
                {"scale_dtype", plan.scale_dtype}}},
              {"layers", layers},
              {"summary",
               {{"equivalent_bits", s.equivalent_bits},
                {"effective_bits", s.effective_bits},
                {"bytes_per_token", s.bytes_per_token},
                {"bf16_bytes_per_token", s.bf16_bytes_per_token},
                {"compression_ratio", s.compression_ratio}}}};
  results_to_json(plan.results, out);
  return out;
}

void write_plan(const std::filesystem::path& path, const Plan& plan) {
  write_file_atomic(path, json_text(plan_to_json(plan), 2) + "\n");
}

void check_plan_matches(const Plan& plan, const KvGeometry& model,
                        const std::string& model_source) {
  const KvGeometry& g = plan.model.geometry;
  if (g.n_layers() != model.n_layers()) {
    fail(ErrorCode::kInvalidArgument, "plan for '{}' has {} layers but {} has {}", plan.model.name,
         g.n_layers(), model_source, model.n_layers());
  }
  for (int l = 0; l < g.n_layers(); ++l) {
    const KvLayerGeometry& a = g.layers[l];
    const KvLayerGeometry& b = model.layers[l];
    if (a.n_kv_heads != b.n_kv_heads || a.head_dim != b.head_dim) {
      fail(ErrorCode::kInvalidArgument,
           "plan for '{}' does not match {}: layer {} has {} KV heads "
           "x head_dim {} in the plan, {} x {} in the model",
           plan.model.name, model_source, l, a.n_kv_heads, a.head_dim, b.n_kv_heads, b.head_dim);
    }
  }
}

Plan plan_of_pairs(const KvModel& model, const std::vector<KvPair>& pairs,
                   const QuantSettings& settings, const std::vector<KvHeadScales>& fp8_scales) {
  if (pairs.size() != static_cast<size_t>(model.geometry.n_layers()) ||
      (!fp8_scales.empty() && fp8_scales.size() != pairs.size())) {
    fail(ErrorCode::kInvalidArgument, "{} pairs and {} FP8 scales for a {}-layer model",
         pairs.size(), fp8_scales.size(), model.geometry.n_layers());
  }
  Plan plan;
  plan.model = model;
  plan.quantization = settings;
  for (size_t l = 0; l < pairs.size(); ++l) {
    plan.layers.push_back(
        {static_cast<int>(l), 0, pairs[l], fp8_scales.empty() ? KvHeadScales{} : fp8_scales[l]});
  }
  return plan;
}

}  // namespace kvplan
