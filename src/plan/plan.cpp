#include "plan/plan.h"

#include <cmath>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_text.h"
#include "plan/memory_estimate.h"

namespace kvplan {
namespace {

using nlohmann::json;

const json& required(const json& j, const char* field, const std::string& where) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    fail(ErrorCode::kInvalidArgument, "{}: field '{}' is missing", where, field);
  }
  return *it;
}

std::string required_string(const json& j, const char* field, const std::string& where) {
  const json& v = required(j, field, where);
  if (!v.is_string()) {
    fail(ErrorCode::kInvalidArgument, "{}: field '{}': expected a string, got {}", where, field,
         json_excerpt(v));
  }
  return v.get<std::string>();
}

int64_t required_int(const json& j, const char* field, const std::string& where, int64_t lo,
                     int64_t hi) {
  const json& v = required(j, field, where);
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    fail(ErrorCode::kInvalidArgument, "{}: field '{}': expected an integer in {}..{}, got {}",
         where, field, lo, hi, json_excerpt(v));
  }
  return v.get<int64_t>();
}

// An optional integer field: `fallback` when absent; otherwise as required_int.
int64_t optional_int(const json& j, const char* field, const std::string& where, int64_t lo,
                     int64_t hi, int64_t fallback) {
  return j.contains(field) ? required_int(j, field, where, lo, hi) : fallback;
}

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

Plan plan_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail(ErrorCode::kInvalidArgument, "{}: expected a JSON object", source);
  const std::string schema = required_string(j, "schema", source);
  if (schema != kPlanSchema && schema != kPlanSchemaV1) {
    fail(ErrorCode::kInvalidArgument, "{}: field 'schema' is '{}', expected '{}' (or '{}')", source,
         schema, kPlanSchema, kPlanSchemaV1);
  }
  Plan plan;
  plan.tool_version = required_string(j, "tool_version", source);
  plan.created = required_string(j, "created", source);

  const std::string mwhere = source + ": model";
  const json& m = required(j, "model", source);
  if (!m.is_object()) fail(ErrorCode::kInvalidArgument, "{}: expected an object", mwhere);
  plan.model.name = required_string(m, "name", mwhere);
  plan.model.architecture = required_string(m, "architecture", mwhere);
  plan.model.fingerprint = required_string(m, "fingerprint", mwhere);
  const int n_layers = static_cast<int>(required_int(m, "num_layers", mwhere, 1, 100000));
  plan.model.num_attention_heads =
      static_cast<int>(required_int(m, "num_attention_heads", mwhere, 1, 1 << 20));
  const int head_dim = static_cast<int>(required_int(m, "head_dim", mwhere, 1, 1 << 16));
  plan.model.geometry.model_name = plan.model.name;
  plan.model.geometry.layers.assign(n_layers, {0, head_dim, 0});
  const json& kv = required(m, "num_kv_heads", mwhere);
  if (kv.is_array()) {
    if (static_cast<int>(kv.size()) != n_layers) {
      fail(ErrorCode::kInvalidArgument, "{}: field 'num_kv_heads' lists {} layers, expected {}",
           mwhere, kv.size(), n_layers);
    }
    for (int l = 0; l < n_layers; ++l) {
      if (!kv[l].is_number_integer() || kv[l].get<int>() <= 0) {
        fail(ErrorCode::kInvalidArgument, "{}: num_kv_heads[{}]: expected a positive integer",
             mwhere, l);
      }
      plan.model.geometry.layers[l].n_kv_heads = kv[l].get<int>();
    }
  } else {
    const int n = static_cast<int>(required_int(m, "num_kv_heads", mwhere, 1, 1 << 20));
    for (auto& lg : plan.model.geometry.layers) lg.n_kv_heads = n;
  }
  if (m.contains("sliding_window") && m["sliding_window"].is_array()) {
    const json& w = m["sliding_window"];
    if (static_cast<int>(w.size()) != n_layers) {
      fail(ErrorCode::kInvalidArgument, "{}: field 'sliding_window' lists {} layers, expected {}",
           mwhere, w.size(), n_layers);
    }
    for (int l = 0; l < n_layers; ++l) {
      plan.model.geometry.layers[l].sliding_window =
          w[l].is_number_integer() ? w[l].get<int64_t>() : 0;
    }
  }

  const std::string qwhere = source + ": quantization";
  const json& q = required(j, "quantization", source);
  plan.quantization.mode = [&] {
    try {
      return parse_quant_mode(required_string(q, "mode", qwhere));
    } catch (const Error& e) {
      fail(ErrorCode::kInvalidArgument, "{}: {}", qwhere, e.what());
    }
  }();
  plan.quantization.group_size =
      static_cast<size_t>(required_int(q, "group_size", qwhere, 1, 4096));
  plan.quantization.residual_length =
      static_cast<size_t>(required_int(q, "residual_length", qwhere, 0, 1 << 20));
  plan.quantization.block_size =
      static_cast<size_t>(required_int(q, "block_size", qwhere, 1, 1 << 20));
  if (q.contains("scale_dtype")) plan.scale_dtype = required_string(q, "scale_dtype", qwhere);
  try {
    plan.quantization.validate();
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "{}: {}", qwhere, e.what());
  }

  const json& layers = required(j, "layers", source);
  if (!layers.is_array() || static_cast<int>(layers.size()) != n_layers) {
    fail(ErrorCode::kInvalidArgument,
         "{}: field 'layers': expected an array of num_layers = {} "
         "entries, got {}",
         source, n_layers, layers.is_array() ? layers.size() : 0);
  }
  for (int l = 0; l < n_layers; ++l) {
    const std::string where = fmt::format("{}: layers[{}]", source, l);
    const json& e = layers[l];
    if (!e.is_object()) fail(ErrorCode::kInvalidArgument, "{}: expected an object", where);
    PlanLayer layer;
    layer.index = static_cast<int>(required_int(e, "index", where, l, l));
    layer.group = static_cast<int>(optional_int(e, "group", where, 0, n_layers, 0));
    layer.pair =
        parse_pair_at(required_string(e, "key", where), required_string(e, "value", where), where);
    // Sizes written in the file must agree with what the formats say.
    const LayerTokenBytes bytes = [&] {
      try {
        return layer_bytes_per_token(plan.model.geometry.layers[l], layer.pair, plan.quantization,
                                     l);
      } catch (const Error& err) {
        fail(ErrorCode::kInvalidArgument, "{}: {}", source, err.what());
      }
    }();
    for (const auto& [field, expected] : {std::pair{"key_bytes_per_token", bytes.key},
                                          std::pair{"value_bytes_per_token", bytes.value}}) {
      if (e.contains(field)) {
        if (!e[field].is_number() || std::fabs(e[field].get<double>() - expected) > 1e-6) {
          fail(ErrorCode::kInvalidArgument, "{}: field '{}' is {}, but {} gives {}", where, field,
               json_excerpt(e[field]), layer.pair.name(), expected);
        }
      }
    }
    plan.layers.push_back(layer);
  }
  if (j.contains("quality")) plan.quality = j["quality"];
  if (j.contains("pareto_front")) plan.pareto_front = j["pareto_front"];
  if (j.contains("baselines")) plan.baselines = j["baselines"];
  if (j.contains("provenance")) plan.provenance = j["provenance"];
  if (!plan.pareto_front.is_array() || !plan.baselines.is_array()) {
    fail(ErrorCode::kInvalidArgument, "{}: fields 'pareto_front' and 'baselines' must be arrays",
         source);
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
                {"num_attention_heads", plan.model.num_attention_heads},
                {"num_kv_heads",
                 uniform_heads && !g.layers.empty() ? json(g.layers.front().n_kv_heads) : kv_heads},
                {"head_dim", g.layers.empty() ? 0 : g.layers.front().head_dim}};
  if (any_window) model["sliding_window"] = windows;
  json layers = json::array();
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const PlanLayer& layer = plan.layers[l];
    const LayerTokenBytes b =
        layer_bytes_per_token(g.layers[l], layer.pair, plan.quantization, static_cast<int>(l));
    layers.push_back({{"index", layer.index},
                      {"group", layer.group},
                      {"key", layer.pair.key.name()},
                      {"value", layer.pair.value.name()},
                      {"key_bytes_per_token", b.key},
                      {"value_bytes_per_token", b.value}});
  }
  const PlanSummary s = summarize_plan(plan);
  return {{"schema", kPlanSchema},
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
            {"compression_ratio", s.compression_ratio}}},
          {"quality", plan.quality},
          {"pareto_front", plan.pareto_front},
          {"baselines", plan.baselines},
          {"provenance", plan.provenance}};
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

}  // namespace kvplan
