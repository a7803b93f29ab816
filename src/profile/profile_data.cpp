#include "profile/profile_data.h"

#include <cmath>
#include <map>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_text.h"

namespace kvplan {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxLayers = 100000;  // as plan.json

// Field access that names the file and the JSON path in every error.
class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  const Json& at(const Json& obj, const std::string& key, const std::string& path) const {
    if (!obj.is_object() || !obj.contains(key)) {
      fail(ErrorCode::kInvalidArgument, "{}: field '{}' is missing", source_, join(path, key));
    }
    return obj[key];
  }
  std::string str(const Json& obj, const std::string& key, const std::string& path) const {
    const Json& v = at(obj, key, path);
    if (!v.is_string()) bad(path, key, "a string", v);
    return v.get<std::string>();
  }
  // Counts stored as int are bounded by INT32_MAX (a larger one would wrap in the cast); layers
  // by kMaxLayers so that per-layer tables stay small whatever the file claims.
  int64_t integer(const Json& obj, const std::string& key, const std::string& path, int64_t min,
                  int64_t max = INT32_MAX) const {
    const Json& v = at(obj, key, path);
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max ||
        (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max))) {
      bad(path, key, fmt::format("an integer in {}..{}", min, max), v);
    }
    return v.get<int64_t>();
  }
  double number(const Json& obj, const std::string& key, const std::string& path) const {
    const Json& v = at(obj, key, path);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      bad(path, key, "a finite number >= 0", v);
    }
    return v.get<double>();
  }
  bool boolean(const Json& obj, const std::string& key, const std::string& path) const {
    const Json& v = at(obj, key, path);
    if (!v.is_boolean()) bad(path, key, "true or false", v);
    return v.get<bool>();
  }
  [[noreturn]] void bad(const std::string& path, const std::string& key, const std::string& want,
                        const Json& got) const {
    fail(ErrorCode::kInvalidArgument, "{}: field '{}': expected {}, got {}", source_,
         join(path, key), want, json_excerpt(got));
  }
  [[noreturn]] void invalid(const std::string& path, const std::string& what) const {
    fail(ErrorCode::kInvalidArgument, "{}: field '{}': {}", source_, path, what);
  }
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  const std::string& source_;
};

}  // namespace

void Profile::reset_cells() {
  cells.assign(static_cast<size_t>(model.num_layers),
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
  j["model"] = {{"name", p.model.name},
                {"architecture", p.model.architecture},
                {"fingerprint", p.model.fingerprint},
                {"num_layers", p.model.num_layers},
                {"num_attention_heads", p.model.num_attention_heads},
                {"num_kv_heads", p.model.num_kv_heads},
                {"head_dim", p.model.head_dim}};
  j["calibration"] = {
      {"source", p.calibration.source},         {"hash", p.calibration.hash},
      {"prompts", p.calibration.prompts},       {"tokens", p.calibration.tokens},
      {"max_tokens", p.calibration.max_tokens}, {"truncated", p.calibration.truncated},
      {"kl_prompts", p.calibration.kl_prompts}, {"kl_tokens", p.calibration.kl_tokens}};
  j["quantization"] = {{"mode", quant_mode_name(p.quantization.mode)},
                       {"group_size", p.quantization.group_size},
                       {"residual_length", p.quantization.residual_length},
                       {"chunk_attends_quantized", p.chunk_attends_quantized}};
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
      pairs.push_back({{"pair", c->pair.name()},
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
                       {"dkl_measured", c->metrics.dkl_measured}});
    }
    layers.push_back({{"index", l}, {"pairs", pairs}});
  }
  j["layers"] = layers;
  j["timings"] = p.timings;
  return j;
}

std::string profile_text(const Profile& profile) {
  return json_text(profile_to_json(profile), 1) + "\n";
}

Profile profile_from_json(const Json& j, const std::string& source) {
  const Reader r(source);
  Profile p;
  if (!j.is_object()) r.invalid("(root)", "expected a JSON object");
  const std::string schema = r.str(j, "schema", "");
  const bool v1 = schema == kProfileSchemaV1;
  if (schema != kProfileSchema && !v1) {
    r.invalid("schema", fmt::format("expected \"{}\" (or \"{}\"), got \"{}\"", kProfileSchema,
                                    kProfileSchemaV1, schema));
  }
  p.tool_version = r.str(j, "tool_version", "");
  const Json& m = r.at(j, "model", "");
  p.model.name = r.str(m, "name", "model");
  p.model.architecture = r.str(m, "architecture", "model");
  p.model.fingerprint = r.str(m, "fingerprint", "model");
  p.model.num_layers = static_cast<int>(r.integer(m, "num_layers", "model", 1, kMaxLayers));
  p.model.num_attention_heads = static_cast<int>(r.integer(m, "num_attention_heads", "model", 1));
  p.model.head_dim = static_cast<int>(r.integer(m, "head_dim", "model", 1));
  const Json& kv = r.at(m, "num_kv_heads", "model");
  if (!kv.is_array() || kv.size() != static_cast<size_t>(p.model.num_layers)) {
    r.bad("model", "num_kv_heads", fmt::format("an array of {} counts", p.model.num_layers), kv);
  }
  for (const Json& n : kv) {
    if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > INT32_MAX) {
      r.bad("model", "num_kv_heads", "counts >= 1", n);
    }
    p.model.num_kv_heads.push_back(n.get<int>());
  }
  const Json& c = r.at(j, "calibration", "");
  p.calibration.source = r.str(c, "source", "calibration");
  p.calibration.hash = r.str(c, "hash", "calibration");
  p.calibration.prompts = static_cast<int>(r.integer(c, "prompts", "calibration", 1));
  p.calibration.tokens = r.integer(c, "tokens", "calibration", 1, INT64_MAX);
  p.calibration.max_tokens = static_cast<int>(r.integer(c, "max_tokens", "calibration", 1));
  p.calibration.truncated = static_cast<int>(r.integer(c, "truncated", "calibration", 0));
  p.calibration.kl_prompts = static_cast<int>(r.integer(c, "kl_prompts", "calibration", 0));
  p.calibration.kl_tokens = r.integer(c, "kl_tokens", "calibration", 0, INT64_MAX);
  const Json& q = r.at(j, "quantization", "");
  try {
    p.quantization.mode = parse_quant_mode(r.str(q, "mode", "quantization"));
  } catch (const Error& e) {
    r.invalid("quantization.mode", e.what());
  }
  p.quantization.group_size = static_cast<size_t>(r.integer(q, "group_size", "quantization", 1));
  p.quantization.residual_length =
      static_cast<size_t>(r.integer(q, "residual_length", "quantization", 0));
  p.chunk_attends_quantized = r.boolean(q, "chunk_attends_quantized", "quantization");
  const Json& cand = r.at(j, "candidates", "");
  if (!cand.is_array() || cand.empty()) r.bad("", "candidates", "a non-empty array", cand);
  for (size_t i = 0; i < cand.size(); ++i) {
    if (!cand[i].is_string()) r.bad("", fmt::format("candidates[{}]", i), "a pair name", cand[i]);
    try {
      p.candidates.push_back(KvPair::parse(cand[i].get<std::string>()));
    } catch (const Error& e) {
      r.invalid(fmt::format("candidates[{}]", i), e.what());
    }
  }
  if (j.contains("shard")) {
    p.shard_count = static_cast<int>(r.integer(j["shard"], "count", "shard", 1));
    p.shard_index = static_cast<int>(r.integer(j["shard"], "index", "shard", 0));
    if (p.shard_index >= p.shard_count) {
      r.invalid("shard.index",
                fmt::format("{} is not below shard.count {}", p.shard_index, p.shard_count));
    }
  }
  p.reset_cells();
  if (!v1) {
    const Json& measured = r.at(j, "dkl_measured", "");
    if (!measured.is_array()) r.bad("", "dkl_measured", "an array of candidate names", measured);
    p.dkl_measured.assign(p.candidates.size(), false);
    for (const Json& name : measured) {
      bool found = false;
      for (size_t k = 0; k < p.candidates.size(); ++k) {
        if (name.is_string() && p.candidates[k].name() == name.get<std::string>()) {
          p.dkl_measured[k] = found = true;
        }
      }
      if (!found) r.bad("", "dkl_measured", "names listed in candidates", name);
    }
  }
  // Name -> candidate, the last of equal names (as the linear search this replaces): a lookup per
  // cell, not a scan of every candidate.
  std::map<std::string, size_t> candidate_index;
  for (size_t k = 0; k < p.candidates.size(); ++k) candidate_index[p.candidates[k].name()] = k;
  const Json& layers = r.at(j, "layers", "");
  if (!layers.is_array() || layers.size() != static_cast<size_t>(p.model.num_layers)) {
    r.bad("", "layers", fmt::format("an array of {} layers", p.model.num_layers), layers);
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::string lp = fmt::format("layers[{}]", l);
    if (r.integer(layers[l], "index", lp, 0) != static_cast<int64_t>(l)) {
      r.invalid(lp + ".index", fmt::format("expected {}", l));
    }
    const Json& pairs = r.at(layers[l], "pairs", lp);
    if (!pairs.is_array()) r.bad(lp, "pairs", "an array", pairs);
    for (size_t i = 0; i < pairs.size(); ++i) {
      const std::string cp = fmt::format("{}.pairs[{}]", lp, i);
      const Json& cj = pairs[i];
      const std::string name = r.str(cj, "pair", cp);
      const auto found = candidate_index.find(name);
      if (found == candidate_index.end()) {
        r.invalid(cp + ".pair", fmt::format("'{}' is not one of the candidates", name));
      }
      const size_t idx = found->second;
      ProfileCell cell;
      cell.pair = p.candidates[idx];
      if (r.str(cj, "key", cp) != cell.pair.key.name() ||
          r.str(cj, "value", cp) != cell.pair.value.name()) {
        r.invalid(cp, fmt::format("key/value formats disagree with pair '{}'", name));
      }
      cell.key_bits = r.number(cj, "key_bits", cp);
      cell.value_bits = r.number(cj, "value_bits", cp);
      cell.nominal_bits = r.number(cj, "nominal_bits", cp);
      cell.key_bytes_per_token = r.number(cj, "key_bytes_per_token", cp);
      cell.value_bytes_per_token = r.number(cj, "value_bytes_per_token", cp);
      cell.metrics.e_k = r.number(cj, "e_k", cp);
      cell.metrics.e_v = r.number(cj, "e_v", cp);
      cell.metrics.e_a = r.number(cj, "e_a", cp);
      cell.metrics.e_o = r.number(cj, "e_o", cp);
      cell.metrics.dkl = r.number(cj, "dkl", cp);
      if (!v1) {
        cell.metrics.o_mse = r.number(cj, "o_mse", cp);
        cell.metrics.dkl_measured = r.boolean(cj, "dkl_measured", cp);
      }
      auto& slot = p.cells[l][idx];
      if (slot) r.invalid(cp, fmt::format("pair '{}' appears twice in layer {}", name, l));
      if (shard_of_cell(static_cast<int>(l), idx, p.candidates.size(), p.shard_count) !=
          p.shard_index) {
        r.invalid(cp, fmt::format("layer {} pair '{}' does not belong to shard {}/{}", l, name,
                                  p.shard_index, p.shard_count));
      }
      slot = cell;
    }
  }
  if (j.contains("timings")) p.timings = j["timings"];
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
  check(differ("model.num_layers", a.model.num_layers, b.model.num_layers));
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
  std::string ca, cb;
  for (const KvPair& p : a.candidates) ca += (ca.empty() ? "" : ",") + p.name();
  for (const KvPair& p : b.candidates) cb += (cb.empty() ? "" : ",") + p.name();
  check(differ("candidates", ca, cb));
  std::string ma, mb;
  for (size_t k = 0; k < a.candidates.size(); ++k) ma += a.measures_dkl(k) ? '1' : '0';
  for (size_t k = 0; k < b.candidates.size(); ++k) mb += b.measures_dkl(k) ? '1' : '0';
  check(differ("dkl_measured", ma, mb));
  return d;
}

}  // namespace kvplan
