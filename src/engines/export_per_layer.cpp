// Exports to the engines that take per-layer K/V types: ik_llama.cpp (first/last-N flags),
// TensorRT-LLM (dtype ranges) and ModelOpt's per-layer KV config, and the dispatch by engine that
// refuses a plan an engine cannot express any part of. Grammars: docs/engine-kv-formats.md
// sections 5, 7 and 8.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "engines/exporters.h"

namespace kvplan {
namespace {

// The one dtype a layer takes on an engine that stores one for K and V: its wider side's, mapped
// to the engine's formats.
Format layer_dtype(const EngineSpec& engine, const KvPair& p, int head_dim,
                   const std::vector<UniformBaseline>& measured) {
  const Format k = nearest_engine_format(engine, p.key, head_dim, measured),
               v = nearest_engine_format(engine, p.value, head_dim, measured);
  return k.info().bits >= v.info().bits ? k : v;
}

void note_side_loss(PlanExport& e, const EngineSpec& engine, int layer, const char* side,
                    const Format& planned, const Format& exported, const char* why_same) {
  if (planned == exported) return;
  e.losses.push_back({layer, side, planned.name(), exported.name(),
                      engine_stores(engine, planned)
                          ? std::string(why_same)
                          : fmt::format("{} does not store {} (its formats: {})", engine.display,
                                        planned.name(), engine_format_list(engine))});
}

// Each layer's one dtype for an engine that stores one per layer (the wider side's, mapped to
// the engine's formats), with the pairs it runs and every side that changes.
std::vector<Format> one_dtype_per_layer(PlanExport& e, const EngineSpec& engine, const Plan& plan,
                                        const char* why_same) {
  std::vector<Format> dtypes;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const PlanLayer& l = plan.layers[i];
    const Format d = layer_dtype(engine, l.pair, plan.model.geometry.layers.at(i).head_dim,
                                 plan.results.baselines);
    e.runs.push_back(KvPair::uniform(d));
    note_side_loss(e, engine, l.index, "key", l.pair.key, d, why_same);
    note_side_loss(e, engine, l.index, "value", l.pair.value, d, why_same);
    dtypes.push_back(d);
  }
  return dtypes;
}

// One side's types over the layers as ik_llama.cpp takes them: a type for the first N layers, one
// for the last M, one (-ctk/-ctv) for the rest. Layers between the first and last runs that differ
// take the widest type among them (never fewer bits than planned; the most frequent of equally
// wide ones), listed as losses.
struct FirstLastN {
  Format middle, first, last;
  int n_first = 0, n_last = 0;
};

FirstLastN first_last_n(const std::vector<Format>& t) {
  const int n = static_cast<int>(t.size());
  if (n == 0) return {};
  int first = 1;
  while (first < n && t[first] == t[0]) ++first;
  if (first == n) return {t[0], t[0], t[0], 0, 0};
  int last = 1;
  while (last < n - first && t[n - 1 - last] == t[n - 1]) ++last;
  FirstLastN r;
  if (first + last == n) {  // two runs: the longer is the default type, the shorter apart
    if (first >= last) {
      r.middle = t[0], r.last = t[n - 1], r.n_last = last;
    } else {
      r.middle = t[n - 1], r.first = t[0], r.n_first = first;
    }
    return r;
  }
  // The widest type between the runs; among equally wide ones the most frequent, then the first.
  std::map<FormatId, int> count;
  for (int i = first; i < n - last; ++i) ++count[t[i].id()];
  r.middle = t[first];
  for (int i = first; i < n - last; ++i) {
    const int bits = t[i].info().bits, best = r.middle.info().bits;
    if (bits > best || (bits == best && count[t[i].id()] > count[r.middle.id()])) r.middle = t[i];
  }
  if (t[0] != r.middle) r.first = t[0], r.n_first = first;
  if (t[n - 1] != r.middle) r.last = t[n - 1], r.n_last = last;
  return r;
}

std::string first_last_flags(const char* flag, const FirstLastN& s) {
  std::string out;
  if (s.n_first > 0) {
    out += fmt::format(" -{}-first {},{}", flag, engine_cache_type(s.first).name(), s.n_first);
  }
  if (s.n_last > 0) {
    out += fmt::format(" -{}-last {},{}", flag, engine_cache_type(s.last).name(), s.n_last);
  }
  return out;
}

Format type_at(const FirstLastN& s, int layer, int n_layers) {
  if (layer < s.n_first) return s.first;
  if (layer >= n_layers - s.n_last) return s.last;
  return s.middle;
}

// TensorRT-LLM's and ModelOpt's names of a dtype.
std::string trtllm_dtype(const Format& f) {
  switch (f.id()) {
    case FormatId::kFp8E4M3:
      return "fp8";
    case FormatId::kNvfp4:
      return "nvfp4";
    case FormatId::kBF16:
      return "bfloat16";
    case FormatId::kF16:
      return "float16";
    default:
      fail(ErrorCode::kInternal, "{} is not a TensorRT-LLM KV dtype", f.name());
  }
}

bool packs_row(const Format& f, int head_dim) {
  try {
    (void)packed_row_bytes(f, static_cast<size_t>(head_dim), static_cast<size_t>(head_dim));
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

Format nearest_engine_format(const EngineSpec& engine, const Format& f, int head_dim,
                             const std::vector<UniformBaseline>& measured) {
  return nearest_stored_format(engine, f, head_dim, measured,
                               [&](const Format& c) { return engine_stores(engine, c); });
}

Format nearest_stored_format(const EngineSpec& engine, const Format& f, int head_dim,
                             const std::vector<UniformBaseline>& measured,
                             const std::function<bool(const Format&)>& stored) {
  if (stored(f)) return f;
  // Rank: the fewest bits at or above the plan's (else the most there are), the plan's family,
  // the lower mean KL the plan measured for the format as a uniform pair, catalogue order.
  const auto kl_of = [&](const Format& c) {
    const std::string uniform = KvPair::uniform(c).name();
    for (const UniformBaseline& b : measured) {
      if (b.mean_kl && KvPair::parse(b.kv).name() == uniform) return *b.mean_kl;
    }
    return std::numeric_limits<double>::infinity();
  };
  const auto rank = [&](const Format& c) {
    const int bits = c.info().bits, want = f.info().bits;
    return std::tuple{bits >= want ? 0 : 1, bits >= want ? bits : -bits,
                      c.family() == f.family() ? 0 : 1, kl_of(c)};
  };
  std::optional<Format> best;
  for (const Format& c : engine_formats(engine)) {
    if (c.id() == FormatId::kF32 || !stored(c) || !packs_row(c, head_dim)) continue;
    if (!best || rank(c) < rank(*best)) best = c;
  }
  if (!best) {
    fail(ErrorCode::kUnimplemented, "{} stores no format that packs rows of head_dim {}",
         engine.display, head_dim);
  }
  return *best;
}

PlanExport export_ik_llamacpp(const Plan& plan) {
  const EngineSpec& ik = engine_spec(EngineId::kIkLlamaCpp);
  const int common = common_head_dim(plan.model.geometry);
  PlanExport e;
  // -khad/-vhad rotate a side on every layer: each side takes the setting that keeps the most of
  // its planned types (no flag on a tie), and the other layers the nearest type it stores.
  std::vector<Format> keys, values;
  RotationSetting setting;
  size_t least_changed = SIZE_MAX;
  for (const RotationSetting& s : rotation_settings(ik, common)) {
    std::vector<Format> k, v;
    size_t changed = 0;
    for (size_t i = 0; i < plan.layers.size(); ++i) {
      const int head_dim = plan.model.geometry.layers.at(i).head_dim;
      const std::vector<UniformBaseline>& measured = plan.results.baselines;
      const KvPair& planned = plan.layers[i].pair;
      k.push_back(nearest_stored_format(ik, planned.key, head_dim, measured, [&](const Format& c) {
        return setting_stores(ik, s, common, true, c);
      }));
      v.push_back(nearest_stored_format(
          ik, planned.value, head_dim, measured,
          [&](const Format& c) { return setting_stores(ik, s, common, false, c); }));
      changed += (k.back() != planned.key) + (v.back() != planned.value);
    }
    if (changed < least_changed) {
      least_changed = changed, setting = s, keys = std::move(k), values = std::move(v);
    }
  }
  const FirstLastN k = first_last_n(keys), v = first_last_n(values);
  const int n = static_cast<int>(plan.layers.size());
  bool quantized_v = false;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const PlanLayer& l = plan.layers[i];
    const Format kt = type_at(k, static_cast<int>(i), n), vt = type_at(v, static_cast<int>(i), n);
    const char* between =
        "ik_llama.cpp sets one type between its first-N and last-M layers: the widest type "
        "planned there";
    e.runs.push_back({kt, vt});
    note_side_loss(e, ik, l.index, "key", l.pair.key, kt, between);
    note_side_loss(e, ik, l.index, "value", l.pair.value, vt, between);
    quantized_v = quantized_v || vt.family() != FormatFamily::kPlain;
  }
  e.text = fmt::format("-ctk {} -ctv {}{}{}", engine_cache_type(k.middle).name(),
                       engine_cache_type(v.middle).name(), first_last_flags("ctk", k),
                       first_last_flags("ctv", v));
  if (setting.keys) e.text += " -khad";
  if (setting.values) e.text += " -vhad";
  if (setting.keys || setting.values) {
    e.notes.push_back(fmt::format(
        "{} rotate{} every layer's {} (a Hadamard transform of the head's row, or of its spans "
        "of 64, before it is stored: kvplan's *_had or *_had64 formats); a 16-bit side under it "
        "is rotated too, which changes nothing but f16 rounding",
        rotation_words(ik, setting), setting.keys && setting.values ? "" : "s",
        setting.keys && setting.values ? "K and V"
        : setting.keys                 ? "K"
                                       : "V"));
  }
  if (quantized_v) {
    e.text += " -fa";
    e.notes.push_back("a quantized V cache needs flash attention (-fa)");
  }
  if (k.n_first + k.n_last + v.n_first + v.n_last > 0) {
    e.notes.push_back(
        "-ctk-first/-ctk-last/-ctv-first/-ctv-last need ik_llama.cpp with PR #1599 (2026-04-08) "
        "and, for -ctv-last, the fix of PR #1626 (2026-04-12)");
  }
  if (plan.quantization.mode != QuantMode::kPerToken) {
    e.losses.push_back({-1, "mode", std::string(quant_mode_name(plan.quantization.mode)),
                        "per-token", "ik_llama.cpp quantizes K and V per token"});
  }
  return e;
}

PlanExport export_trtllm(const Plan& plan) {
  PlanExport e;
  const std::vector<Format> dtypes =
      one_dtype_per_layer(e, engine_spec(EngineId::kTrtllm), plan,
                          "TensorRT-LLM stores one dtype for K and V of a layer: the wider side's");
  // Runs of consecutive layers alike, "first-last:dtype" each.
  std::string ranges;
  for (size_t i = 0, start = 0; i < plan.layers.size(); ++i) {
    const bool run_ends = i + 1 == plan.layers.size() || dtypes[i + 1] != dtypes[i] ||
                          plan.layers[i + 1].index != plan.layers[i].index + 1;
    if (!run_ends) continue;
    ranges += fmt::format("{}{}-{}:{}", ranges.empty() ? "" : ",", plan.layers[start].index,
                          plan.layers[i].index, trtllm_dtype(dtypes[i]));
    start = i + 1;
  }
  e.text = fmt::format(
      "# TensorRT-LLM LLM API options (trtllm-serve --extra_llm_api_options <this file>)\n"
      "kv_cache_config:\n  dtype: \"{}\"\n",
      ranges);
  e.notes.push_back(
      "per-layer KvCacheConfig.dtype ranges are TensorRT-LLM PR #13695 (open when this was "
      "written); released versions take one dtype: auto, fp8 or nvfp4");
  e.notes.push_back(
      "16-bit layers are written with TensorRT-LLM's dtype names (float16, bfloat16); the PR "
      "lists FP16 and BF16 among per-layer dtypes without its spelling in the stored sources");
  return e;
}

PlanExport export_modelopt(const Plan& plan) {
  PlanExport e;
  const std::vector<Format> dtypes =
      one_dtype_per_layer(e, engine_spec(EngineId::kModelopt), plan,
                          "ModelOpt's per-layer KV config gives a layer one algorithm for K and V");
  std::vector<std::pair<int, std::string>> layers;  // layer, quant_algo, in plan order
  std::map<std::string, int> algos;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    if (is_model_dtype(dtypes[i])) continue;  // a layer not listed is not KV-quantized
    layers.push_back({plan.layers[i].index, dtypes[i].id() == FormatId::kNvfp4 ? "NVFP4" : "FP8"});
    ++algos[layers.back().second];
  }
  std::string body;
  for (const auto& [index, algo] : layers) {
    body += fmt::format("{}      \"model.layers.{}.self_attn\": {{\"quant_algo\": \"{}\"}}",
                        body.empty() ? "" : ",\n", index, algo);
  }
  const std::string kv_algo = algos.size() == 1 && layers.size() == plan.layers.size()
                                  ? algos.begin()->first
                                  : (layers.empty() ? "null" : "MIXED_PRECISION");
  e.text = fmt::format(
      "{{\n  \"producer\": {{\"name\": \"kvplan\", \"version\": \"{}\"}},\n"
      "  \"quantization\": {{\n"
      "    \"quant_algo\": null,\n"
      "    \"kv_cache_quant_algo\": {},\n"
      "    \"kv_cache_schema_version\": 1,\n"
      "    \"kv_cache_quantized_layers\": {{\n{}\n    }}\n  }}\n}}\n",
      plan.tool_version, kv_algo == "null" ? kv_algo : "\"" + kv_algo + "\"", body);
  e.notes.push_back(
      "hf_quant_config.json as ModelOpt exports a per-layer KV config (kv_cache_quantized_layers, "
      "schema 1), the form vLLM's RFC #57445 reads with --kv-cache-dtype auto; layers not "
      "listed keep the model's dtype. Merge it into the checkpoint's own quantization section, "
      "with the checkpoint's k_scale/v_scale per layer");
  return e;
}

PlanExport export_plan(const Plan& plan, EngineId id) {
  const EngineSpec& engine = engine_spec(id);
  require_packable(engine);
  if (id == EngineId::kKvplan) {
    fail(ErrorCode::kInvalidArgument,
         "--to kvplan: the plan is kvplan's own format already; export to one of {}",
         engine_names());
  }
  int stored = 0;
  std::vector<Format> lacking;  // in order of first appearance
  for (const PlanLayer& l : plan.layers) {
    for (const Format& f : {l.pair.key, l.pair.value}) {
      if (engine_stores(engine, f)) {
        ++stored;
      } else if (std::find(lacking.begin(), lacking.end(), f) == lacking.end()) {
        lacking.push_back(f);
      }
    }
  }
  if (stored == 0) {
    fail(ErrorCode::kInvalidArgument,
         "{} cannot express any layer of this plan: it does not store {} (its formats: {}); "
         "search a plan it can run: kvplan search --engine {} (or kvplan tune --engine {})",
         engine.display, format_list(lacking), engine_format_list(engine), engine.name,
         engine.name);
  }
  switch (id) {
    case EngineId::kLlamaCpp:
      return export_llamacpp(plan);
    case EngineId::kIkLlamaCpp:
      return export_ik_llamacpp(plan);
    case EngineId::kVllm:
      return export_vllm(plan);
    case EngineId::kVllmTurboquant:
      return export_vllm_turboquant(plan);
    case EngineId::kTrtllm:
      return export_trtllm(plan);
    case EngineId::kModelopt:
      return export_modelopt(plan);
    case EngineId::kHf:
      return export_kvtuner_yaml(plan);
    default:
      fail(ErrorCode::kInternal, "no exporter for {}", engine.name);
  }
}

}  // namespace kvplan
