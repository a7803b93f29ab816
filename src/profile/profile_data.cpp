#include "profile/profile_data.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_fields.h"
#include "core/json_text.h"

namespace kvplan {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxLayers = 100000;  // as plan.json

}  // namespace

KvHeadScales Profile::fp8_scales(int layer, const KvPair& pair) const {
  if (kv_absmax.empty()) return {};
  return fp8_scales_for(pair, kv_absmax.at(static_cast<size_t>(layer)));
}

void Profile::reset_cells() {
  cells.assign(static_cast<size_t>(model.geometry.n_layers()),
               std::vector<std::optional<ProfileCell>>(candidates.size()));
}

const ProfileCell* Profile::cell(int layer, size_t candidate) const {
  if (layer < 0 || static_cast<size_t>(layer) >= cells.size()) return nullptr;
  const auto& row = cells[static_cast<size_t>(layer)];
  if (candidate >= row.size() || !row[candidate]) return nullptr;
  return &*row[candidate];
}

size_t Profile::n_present() const {
  size_t n = 0;
  for (const auto& row : cells) {
    for (const auto& c : row) n += c.has_value();
  }
  return n;
}

nlohmann::ordered_json profile_to_json(const Profile& p) {
  using OJson = nlohmann::ordered_json;
  OJson j;
  j["schema"] = kProfileSchema;
  j["tool_version"] = p.tool_version;
  const KvGeometry& g = p.model.geometry;
  std::vector<int> kv_heads;
  std::vector<int64_t> windows;
  for (const KvLayerGeometry& l : g.layers) {
    kv_heads.push_back(l.n_kv_heads);
    windows.push_back(l.sliding_window);
  }
  j["model"] = {{"name", p.model.name},
                {"architecture", p.model.architecture},
                {"fingerprint", p.model.fingerprint},
                {"num_layers", g.n_layers()},
                {"num_attention_heads", p.model.n_attention_heads},
                {"num_kv_heads", kv_heads},
                {"head_dim", p.head_dim()}};
  if (std::any_of(windows.begin(), windows.end(), [](int64_t w) { return w > 0; })) {
    j["model"]["sliding_window"] = windows;
  }
  j["calibration"] = {
      {"source", p.calibration.source},         {"hash", p.calibration.hash},
      {"prompts", p.calibration.prompts},       {"tokens", p.calibration.tokens},
      {"max_tokens", p.calibration.max_tokens}, {"truncated", p.calibration.truncated},
      {"kl_prompts", p.calibration.kl_prompts}, {"kl_tokens", p.calibration.kl_tokens}};
  j["quantization"] = {{"mode", quant_mode_name(p.quantization.mode)},
                       {"group_size", p.quantization.group_size},
                       {"residual_length", p.quantization.residual_length},
                       {"chunk_attends_quantized", p.chunk_attends_quantized}};
  // Absent means "cpu", so CPU profiles keep the bytes (and profile_hash) they had before the
  // field.
  if (p.attention_device != "cpu") j["attention_device"] = p.attention_device;
  if (!p.kv_absmax.empty()) {
    OJson absmax = OJson::array();
    for (const KvHeadAbsmax& a : p.kv_absmax)
      absmax.push_back({{"key", a.key}, {"value", a.value}});
    j["kv_absmax"] = absmax;
  }
  OJson candidates = OJson::array();
  for (const KvPair& c : p.candidates) candidates.push_back(c.name());
  j["candidates"] = candidates;
  OJson measured = OJson::array();
  for (size_t c = 0; c < p.candidates.size(); ++c) {
    if (p.measures_dkl(c)) measured.push_back(p.candidates[c].name());
  }
  j["dkl_measured"] = measured;
  if (p.shard_count > 1) j["shard"] = {{"index", p.shard_index}, {"count", p.shard_count}};
  j["complete"] = p.complete();
  OJson layers = OJson::array();
  for (size_t l = 0; l < p.cells.size(); ++l) {
    OJson pairs = OJson::array();
    for (const auto& c : p.cells[l]) {
      if (!c) continue;
      OJson cell = {{"pair", c->pair.name()},
                    {"key", c->pair.key.name()},
                    {"value", c->pair.value.name()},
                    {"key_bits", c->key_bits},
                    {"value_bits", c->value_bits},
                    {"nominal_bits", c->nominal_bits},
                    {"key_bytes_per_token", c->key_bytes_per_token},
                    {"value_bytes_per_token", c->value_bytes_per_token},
                    {"e_k", c->metrics.e_k},
                    {"e_v", c->metrics.e_v},
                    {"e_a", c->metrics.e_a},
                    {"e_o", c->metrics.e_o},
                    {"dkl", c->metrics.dkl},
                    {"o_mse", c->metrics.o_mse},
                    {"dkl_measured", c->metrics.dkl_measured}};
      if (!c->metrics.o_mse_heads.empty()) cell["o_mse_heads"] = c->metrics.o_mse_heads;
      if (!c->metrics.dkl_heads.empty()) cell["dkl_heads"] = c->metrics.dkl_heads;
      pairs.push_back(std::move(cell));
    }
    layers.push_back({{"index", l}, {"pairs", pairs}});
  }
  j["layers"] = layers;
  j["timings"] = timings_to_json(p.timings);
  return j;
}

std::string profile_text(const Profile& profile) {
  return json_text(profile_to_json(profile), 1) + "\n";
}

Profile profile_from_json(const Json& j, const std::string& source) {
  const JsonFields root(j, source);
  Profile p;
  if (!j.is_object()) root.expected("a JSON object");
  const std::string schema = root.string("schema");
  const bool v1 = schema == kProfileSchemaV1;
  if (schema != kProfileSchema && !v1) {
    root.invalid("schema", fmt::format("expected \"{}\" (or \"{}\"), got \"{}\"", kProfileSchema,
                                       kProfileSchemaV1, schema));
  }
  p.tool_version = root.string("tool_version");
  // Counts stored as int are bounded by INT32_MAX (a larger one would wrap in the cast); layers
  // by kMaxLayers so that per-layer tables stay small whatever the file claims.
  const JsonFields m = root.object("model");
  p.model.name = m.string("name");
  p.model.architecture = m.string("architecture");
  p.model.fingerprint = m.string("fingerprint");
  const int n_layers = static_cast<int>(m.integer("num_layers", 1, kMaxLayers));
  p.model.n_attention_heads = static_cast<int>(m.integer("num_attention_heads", 1, INT32_MAX));
  const int head_dim = static_cast<int>(m.integer("head_dim", 1, INT32_MAX));
  p.model.geometry.model_name = p.model.name;
  const JsonFields kv = m.array("num_kv_heads");
  if (kv.size() != static_cast<size_t>(n_layers)) {
    m.expected("num_kv_heads", fmt::format("an array of {} counts", n_layers), kv.value());
  }
  for (size_t l = 0; l < kv.size(); ++l) {
    p.model.geometry.layers.push_back(
        {static_cast<int>(kv.integer_at(l, 1, INT32_MAX)), head_dim, 0});
  }
  // Profiles of models with sliding-window layers record the windows; older ones do not.
  if (m.has("sliding_window")) {
    const JsonFields w = m.array("sliding_window");
    if (w.size() != static_cast<size_t>(n_layers)) {
      m.expected("sliding_window", fmt::format("an array of {} windows", n_layers), w.value());
    }
    for (size_t l = 0; l < w.size(); ++l) {
      p.model.geometry.layers[l].sliding_window = w.integer_at(l, 0, INT64_MAX);
    }
  }
  const JsonFields c = root.object("calibration");
  p.calibration.source = c.string("source");
  p.calibration.hash = c.string("hash");
  p.calibration.prompts = static_cast<int>(c.integer("prompts", 1, INT32_MAX));
  p.calibration.tokens = c.integer("tokens", 1, INT64_MAX);
  p.calibration.max_tokens = static_cast<int>(c.integer("max_tokens", 1, INT32_MAX));
  p.calibration.truncated = static_cast<int>(c.integer("truncated", 0, INT32_MAX));
  p.calibration.kl_prompts = static_cast<int>(c.integer("kl_prompts", 0, INT32_MAX));
  p.calibration.kl_tokens = c.integer("kl_tokens", 0, INT64_MAX);
  const JsonFields q = root.object("quantization");
  const std::string mode = q.string("mode");
  try {
    p.quantization.mode = parse_quant_mode(mode);
  } catch (const Error& e) {
    q.invalid("mode", e.what());
  }
  p.quantization.group_size = static_cast<size_t>(q.integer("group_size", 1, INT32_MAX));
  p.quantization.residual_length = static_cast<size_t>(q.integer("residual_length", 0, INT32_MAX));
  p.quantization.round_block_to_group();  // pages are not stored: the plans' default, fitted
  p.chunk_attends_quantized = q.boolean("chunk_attends_quantized");
  // Profiles written before the field existed recorded the device only in their timings.
  const Json* device = j.contains("attention_device") ? &j["attention_device"] : nullptr;
  if (device == nullptr && j.contains("timings") && j["timings"].is_object() &&
      j["timings"].contains("attention_device")) {
    device = &j["timings"]["attention_device"];
  }
  if (device != nullptr) {
    if (!device->is_string() || (*device != "cpu" && *device != "gpu")) {
      root.expected("attention_device", "\"cpu\" or \"gpu\"", *device);
    }
    p.attention_device = device->get<std::string>();
  }
  if (const auto a = root.optional_array("kv_absmax")) {
    if (a->size() != static_cast<size_t>(p.model.geometry.n_layers())) {
      root.expected("kv_absmax", fmt::format("an array of {} layers", p.model.geometry.n_layers()),
                    a->value());
    }
    for (size_t l = 0; l < a->size(); ++l) {
      const JsonFields layer_fields = a->element(l);
      KvHeadAbsmax layer;
      for (auto [key, out] : {std::pair{"key", &layer.key}, std::pair{"value", &layer.value}}) {
        const JsonFields v = layer_fields.array(key);
        const size_t heads = static_cast<size_t>(p.model.geometry.layers[l].n_kv_heads);
        if (v.size() != heads) {
          layer_fields.expected(key, fmt::format("an array of {} values (one per KV head)", heads),
                                v.value());
        }
        for (size_t h = 0; h < heads; ++h) out->push_back(static_cast<float>(v.number_at(h, 0.0)));
      }
      p.kv_absmax.push_back(std::move(layer));
    }
  }
  const JsonFields cand = root.array("candidates");
  if (cand.size() == 0) root.expected("candidates", "a non-empty array", cand.value());
  for (size_t i = 0; i < cand.size(); ++i) {
    const std::string name = cand.string_at(i);
    try {
      p.candidates.push_back(KvPair::parse(name));
    } catch (const Error& e) {
      cand.element(i).invalid(e.what());
    }
  }
  if (const auto shard = root.optional_object("shard")) {
    p.shard_count = static_cast<int>(shard->integer("count", 1, INT32_MAX));
    p.shard_index = static_cast<int>(shard->integer("index", 0, INT32_MAX));
    if (p.shard_index >= p.shard_count) {
      shard->invalid("index",
                     fmt::format("{} is not below shard.count {}", p.shard_index, p.shard_count));
    }
  }
  p.reset_cells();
  if (!v1) {
    const Json& measured = root.at("dkl_measured");
    if (!measured.is_array())
      root.expected("dkl_measured", "an array of candidate names", measured);
    p.dkl_measured.assign(p.candidates.size(), false);
    for (const Json& name : measured) {
      bool found = false;
      for (size_t k = 0; k < p.candidates.size(); ++k) {
        if (name.is_string() && p.candidates[k].name() == name.get<std::string>()) {
          p.dkl_measured[k] = found = true;
        }
      }
      if (!found) root.expected("dkl_measured", "names listed in candidates", name);
    }
  }
  // Name -> candidate, the last of equal names (as the linear search this replaces): a lookup per
  // cell, not a scan of every candidate.
  std::map<std::string, size_t> candidate_index;
  for (size_t k = 0; k < p.candidates.size(); ++k) candidate_index[p.candidates[k].name()] = k;
  const JsonFields layers = root.array("layers");
  if (layers.size() != static_cast<size_t>(p.model.geometry.n_layers())) {
    root.expected("layers", fmt::format("an array of {} layers", p.model.geometry.n_layers()),
                  layers.value());
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    const JsonFields lf = layers.element(l);
    if (lf.integer("index", 0, INT32_MAX) != static_cast<int64_t>(l)) {
      lf.invalid("index", fmt::format("expected {}", l));
    }
    const JsonFields pairs = lf.array("pairs");
    for (size_t i = 0; i < pairs.size(); ++i) {
      const JsonFields cj = pairs.element(i);
      const std::string name = cj.string("pair");
      const auto found = candidate_index.find(name);
      if (found == candidate_index.end()) {
        cj.invalid("pair", fmt::format("'{}' is not one of the candidates", name));
      }
      const size_t idx = found->second;
      ProfileCell cell;
      cell.pair = p.candidates[idx];
      if (cj.string("key") != cell.pair.key.name() ||
          cj.string("value") != cell.pair.value.name()) {
        cj.invalid(fmt::format("key/value formats disagree with pair '{}'", name));
      }
      cell.key_bits = cj.number("key_bits", 0.0);
      cell.value_bits = cj.number("value_bits", 0.0);
      cell.nominal_bits = cj.number("nominal_bits", 0.0);
      cell.key_bytes_per_token = cj.number("key_bytes_per_token", 0.0);
      cell.value_bytes_per_token = cj.number("value_bytes_per_token", 0.0);
      cell.metrics.e_k = cj.number("e_k", 0.0);
      cell.metrics.e_v = cj.number("e_v", 0.0);
      cell.metrics.e_a = cj.number("e_a", 0.0);
      cell.metrics.e_o = cj.number("e_o", 0.0);
      cell.metrics.dkl = cj.number("dkl", 0.0);
      if (!v1) {
        cell.metrics.o_mse = cj.number("o_mse", 0.0);
        cell.metrics.dkl_measured = cj.boolean("dkl_measured");
        for (const auto& [field, values] : {std::pair{"o_mse_heads", &cell.metrics.o_mse_heads},
                                            std::pair{"dkl_heads", &cell.metrics.dkl_heads}}) {
          const auto heads = cj.optional_array(field);
          if (!heads) continue;
          const int n_kv = p.model.geometry.layers[l].n_kv_heads;
          if (heads->size() != static_cast<size_t>(n_kv)) {
            cj.invalid(field,
                       fmt::format("{} values for the layer's {} KV heads", heads->size(), n_kv));
          }
          for (size_t h = 0; h < heads->size(); ++h) values->push_back(heads->number_at(h));
        }
      }
      auto& slot = p.cells[l][idx];
      if (slot) cj.invalid(fmt::format("pair '{}' appears twice in layer {}", name, l));
      if (shard_of_cell(static_cast<int>(l), idx, p.candidates.size(), p.shard_count) !=
          p.shard_index) {
        cj.invalid(fmt::format("layer {} pair '{}' does not belong to shard {}/{}", l, name,
                               p.shard_index, p.shard_count));
      }
      slot = cell;
    }
  }
  if (const auto timings = root.optional_object("timings")) {
    p.timings = timings_from_json(*timings);
  }
  return p;
}

Profile profile_from_text(std::string_view text, const std::string& source) {
  return profile_from_json(parse_json_text(text, source), source);
}

Profile read_profile(const std::filesystem::path& path) {
  return profile_from_text(read_text_file(path), path.string());
}

void write_profile(const std::filesystem::path& path, const Profile& profile) {
  write_file_atomic(path, profile_text(profile));
}

std::optional<bool> Profile::per_head_dkl() const {
  for (const auto& layer : cells) {
    for (size_t c = 0; c < layer.size(); ++c) {
      if (!layer[c] || !measures_dkl(c) || layer[c]->metrics.o_mse_heads.empty()) continue;
      return !layer[c]->metrics.dkl_heads.empty();
    }
  }
  return std::nullopt;
}

std::string profile_identity_mismatch(const Profile& a, const Profile& b) {
  auto differ = [](const std::string& field, const auto& x, const auto& y) -> std::string {
    if (x == y) return "";
    return fmt::format("{}: {} vs {}", field, x, y);
  };
  std::string d;
  auto check = [&](std::string r) {
    if (d.empty()) d = std::move(r);
  };
  check(differ("model.fingerprint", a.model.fingerprint, b.model.fingerprint));
  check(differ("model.geometry.n_layers()", a.model.geometry.n_layers(),
               b.model.geometry.n_layers()));
  check(differ("calibration.hash", a.calibration.hash, b.calibration.hash));
  check(differ("calibration.tokens", a.calibration.tokens, b.calibration.tokens));
  check(differ("calibration.kl_prompts", a.calibration.kl_prompts, b.calibration.kl_prompts));
  check(differ("quantization.mode", quant_mode_name(a.quantization.mode),
               quant_mode_name(b.quantization.mode)));
  check(differ("quantization.group_size", a.quantization.group_size, b.quantization.group_size));
  check(differ("quantization.residual_length", a.quantization.residual_length,
               b.quantization.residual_length));
  check(differ("quantization.chunk_attends_quantized", a.chunk_attends_quantized,
               b.chunk_attends_quantized));
  check(differ("attention_device", a.attention_device, b.attention_device));
  std::string ca, cb;
  for (const KvPair& p : a.candidates) ca += (ca.empty() ? "" : ",") + p.name();
  for (const KvPair& p : b.candidates) cb += (cb.empty() ? "" : ",") + p.name();
  check(differ("candidates", ca, cb));
  std::string ma, mb;
  for (size_t k = 0; k < a.candidates.size(); ++k) ma += a.measures_dkl(k) ? '1' : '0';
  for (size_t k = 0; k < b.candidates.size(); ++k) mb += b.measures_dkl(k) ? '1' : '0';
  check(differ("dkl_measured", ma, mb));
  // Mixing runs with and without the per-KV-head dKL re-runs would leave some layers' heads
  // apportioned by o_mse alone: the per-head search would rank those layers' heads differently.
  const std::optional<bool> ha = a.per_head_dkl(), hb = b.per_head_dkl();
  auto per_head = [](bool h) { return h ? "measured per KV head" : "not measured per KV head"; };
  if (ha && hb) check(differ("dkl_heads (--per-head-dkl)", per_head(*ha), per_head(*hb)));
  return d;
}

}  // namespace kvplan
