#include "plan/plan.h"

#include <algorithm>
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

std::vector<KvPair> Plan::pairs(std::string_view consumer) const {
  for (const PlanLayer& l : layers) {
    if (l.per_head()) {
      fail(ErrorCode::kUnimplemented,
           "{} takes one pair per layer; this plan's layer {} gives its KV heads different pairs "
           "(a per-KV-head plan: eval, search and export read it)",
           consumer, l.index);
    }
  }
  std::vector<KvPair> out;
  out.reserve(layers.size());
  for (const PlanLayer& l : layers) out.push_back(l.pair);
  return out;
}

bool Plan::per_head() const {
  return std::any_of(layers.begin(), layers.end(), [](const PlanLayer& l) { return l.per_head(); });
}

bool Plan::searched_per_head() const {
  return results.provenance.granularity == "per KV head";
}

std::vector<KvPair> Plan::kv_config() const {
  if (!per_head()) return pairs();
  std::vector<KvPair> out;
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].per_head()) {
      out.insert(out.end(), layers[l].heads.begin(), layers[l].heads.end());
    } else {
      out.insert(out.end(), static_cast<size_t>(model.geometry.layers.at(l).n_kv_heads),
                 layers[l].pair);
    }
  }
  return out;
}

KvPair widest_pair_of_heads(const std::vector<KvPair>& heads, const KvLayerGeometry& layer,
                            const QuantSettings& settings, int layer_index) {
  KvLayerGeometry one = layer;
  one.n_kv_heads = 1;
  KvPair widest = heads.at(0);
  LayerTokenBytes most = layer_bytes_per_token(one, widest, settings, layer_index);
  for (const KvPair& p : heads) {
    const LayerTokenBytes b = layer_bytes_per_token(one, p, settings, layer_index);
    if (b.key > most.key) {
      widest.key = p.key;
      most.key = b.key;
    }
    if (b.value > most.value) {
      widest.value = p.value;
      most.value = b.value;
    }
  }
  return widest;
}

LayerTokenBytes plan_layer_bytes(const Plan& plan, size_t l) {
  const PlanLayer& layer = plan.layers.at(l);
  const KvLayerGeometry& lg = plan.model.geometry.layers.at(l);
  if (layer.per_head()) {
    return layer_heads_bytes_per_token(lg, layer.heads, plan.quantization, static_cast<int>(l));
  }
  return layer_bytes_per_token(lg, layer.pair, plan.quantization, static_cast<int>(l));
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
    const PlanLayer& layer = plan.layers[l];
    if (layer.per_head()) {
      double bits = 0;
      for (const KvPair& p : layer.heads) bits += p.nominal_bits(lg.head_dim);
      s.equivalent_bits += bits / static_cast<double>(layer.heads.size());
    } else {
      s.equivalent_bits += layer.pair.nominal_bits(lg.head_dim);
    }
    s.bytes_per_token += plan_layer_bytes(plan, l).total();
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
  if (schema != kPlanSchema && schema != kPlanSchemaV3 && schema != kPlanSchemaV1) {
    fail(ErrorCode::kInvalidArgument, "{}: field 'schema' is '{}', expected '{}', '{}' or '{}'",
         source, schema, kPlanSchemaV3, kPlanSchema, kPlanSchemaV1);
  }
  const bool v3 = schema == kPlanSchemaV3;
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
    // Groups are of the search's entries: layers, or in a per-head (v3) plan KV heads.
    const int groups = v3 ? std::max(n_layers, plan.model.geometry.n_kv_heads_total()) : n_layers;
    layer.group = static_cast<int>(e.optional_integer("group", 0, groups).value_or(0));
    const KvLayerGeometry& lg = plan.model.geometry.layers[static_cast<size_t>(l)];
    if (const auto heads = e.optional_array("heads")) {
      if (!v3) e.invalid("heads", fmt::format("per-KV-head pairs need schema '{}'", kPlanSchemaV3));
      if (heads->size() != static_cast<size_t>(lg.n_kv_heads)) {
        e.invalid("heads", fmt::format("{} entries, expected one per KV head ({})", heads->size(),
                                       lg.n_kv_heads));
      }
      for (size_t h = 0; h < heads->size(); ++h) {
        const JsonFields he = heads->element(h);
        layer.heads.push_back(parse_pair_at(he.string("key"), he.string("value"),
                                            fmt::format("{}: heads[{}]", e.source(), h)));
      }
      if (std::all_of(layer.heads.begin(), layer.heads.end(),
                      [&](const KvPair& p) { return p == layer.heads[0]; })) {
        e.invalid("heads",
                  "every KV head takes the same pair: write it as the layer's key and value");
      }
      if (e.has("key") || e.has("value")) {
        e.invalid("heads", "a layer lists either its heads' pairs or one key and value, not both");
      }
    }
    if (!layer.per_head()) {
      layer.pair = parse_pair_at(e.string("key"), e.string("value"), e.source());
    }
    // Sizes written in the file must agree with what the formats say.
    const LayerTokenBytes bytes = [&] {
      try {
        if (layer.per_head()) {
          layer.pair = widest_pair_of_heads(layer.heads, lg, plan.quantization, l);
          return layer_heads_bytes_per_token(lg, layer.heads, plan.quantization, l);
        }
        return layer_bytes_per_token(lg, layer.pair, plan.quantization, l);
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
    if (layer.per_head()) {
      for (const auto& [field, side] : {std::pair{"key_fp8_scales", &layer.fp8_scales.key},
                                        std::pair{"value_fp8_scales", &layer.fp8_scales.value}}) {
        if (!side->empty() && side->size() != static_cast<size_t>(lg.n_kv_heads)) {
          e.invalid(field, fmt::format("{} scales, expected one per KV head ({})", side->size(),
                                       lg.n_kv_heads));
        }
      }
      for (size_t h = 0; h < layer.heads.size(); ++h) {
        // Each head's scale is checked with its own format; 1 stands on heads that keep none.
        KvHeadScales one{layer.heads[h].key.has_tensor_scale() && !layer.fp8_scales.key.empty()
                             ? std::vector<float>{layer.fp8_scales.key.at(h)}
                             : std::vector<float>{},
                         layer.heads[h].value.has_tensor_scale() && !layer.fp8_scales.value.empty()
                             ? std::vector<float>{layer.fp8_scales.value.at(h)}
                             : std::vector<float>{}};
        check_fp8_scales(one, layer.heads[h], 1, fmt::format("{}: heads[{}]", e.source(), h));
      }
    } else {
      check_fp8_scales(layer.fp8_scales, layer.pair, lg.n_kv_heads, e.source());
    }
    for (const auto& [field, expected] : {std::pair{"key_bytes_per_token", bytes.key},
                                          std::pair{"value_bytes_per_token", bytes.value}}) {
      if (!e.has(field)) continue;
      const json& v = e.at(field);
      if (!v.is_number() || std::fabs(v.get<double>() - expected) > 1e-6) {
        fail(ErrorCode::kInvalidArgument, "{}: field '{}' is {}, but {} gives {}", e.source(),
             field, json_excerpt(v), layer.per_head() ? "its heads' pairs" : layer.pair.name(),
             expected);
      }
    }
    plan.layers.push_back(layer);
  }
  plan.results = results_from_json(j, source);
  const size_t weights = plan.results.provenance.surrogate_weights.size();
  const bool by_head = plan.searched_per_head();
  if (by_head && !v3) {
    fail(ErrorCode::kInvalidArgument, "{}: field 'provenance.granularity': '{}' needs schema '{}'",
         source, plan.results.provenance.granularity, kPlanSchemaV3);
  }
  const size_t entries =
      by_head ? static_cast<size_t>(plan.model.geometry.n_kv_heads_total()) : plan.layers.size();
  if (weights != 0 && weights != entries) {
    fail(ErrorCode::kInvalidArgument,
         "{}: field 'provenance.surrogate_weights': {} weights, expected one per {} ({})", source,
         weights, by_head ? "KV head" : "layer", entries);
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
    const LayerTokenBytes b = plan_layer_bytes(plan, l);
    json entry = {{"index", layer.index}, {"group", layer.group}};
    if (layer.per_head()) {
      json heads = json::array();
      for (const KvPair& p : layer.heads) {
        heads.push_back({{"key", p.key.name()}, {"value", p.value.name()}});
      }
      entry["heads"] = heads;
    } else {
      entry["key"] = layer.pair.key.name();
      entry["value"] = layer.pair.value.name();
    }
    entry["key_bytes_per_token"] = b.key;
    entry["value_bytes_per_token"] = b.value;
    if (!layer.fp8_scales.key.empty()) entry["key_fp8_scales"] = layer.fp8_scales.key;
    if (!layer.fp8_scales.value.empty()) entry["value_fp8_scales"] = layer.fp8_scales.value;
    layers.push_back(std::move(entry));
  }
  const PlanSummary s = summarize_plan(plan);
  json out = {{"schema", plan.per_head() || plan.searched_per_head() ? kPlanSchemaV3 : kPlanSchema},
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
