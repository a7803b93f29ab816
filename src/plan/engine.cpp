#include "plan/engine.h"

#include <algorithm>
#include <array>
#include <ranges>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace kvplan {
namespace {

using G = LayerGranularity;

// vLLM's TQ_PRESETS (turboquant/config.py): key bits 8 = FP8 keys, else Lloyd-Max keys; uniform
// values. docs/engine-kv-formats.md section 2.
constexpr std::array kTurboquantPresets{
    EnginePreset{"turboquant_k8v4", "tq_fp8/tq_int4"},
    EnginePreset{"turboquant_4bit_nc", "tq_mse4/tq_int4"},
    EnginePreset{"turboquant_k3v4_nc", "tq_mse3/tq_int4"},
    EnginePreset{"turboquant_3bit_nc", "tq_mse3/tq_int3"},
};

constexpr std::array kEngines{
    EngineSpec{EngineId::kKvplan, "kvplan", "kvplan", 0, G::kFree, false, true,
               "plan.json, read by kvplan's runtime library and C API", ""},
    EngineSpec{EngineId::kLlamaCpp, "llamacpp", "llama.cpp", kEngineLlamaCpp, G::kGlobal, false,
               true, "-ctk TYPE -ctv TYPE (common/arg.cpp; a quantized V needs -fa on)", ""},
    EngineSpec{EngineId::kIkLlamaCpp, "ik-llamacpp", "ik_llama.cpp", kEngineIkLlamaCpp,
               G::kFirstLastN, false, true,
               "-ctk/-ctv TYPE, -ctk-first/-ctk-last/-ctv-first/-ctv-last TYPE,N (ik_llama.cpp "
               "PR #1599)",
               ""},
    EngineSpec{EngineId::kVllm, "vllm", "vLLM", kEngineVllm, G::kSkipList, true, true,
               "--kv-cache-dtype DTYPE --kv-cache-dtype-skip-layers L ... (vllm/config/cache.py)",
               ""},
    EngineSpec{EngineId::kVllmTurboquant, "vllm-turboquant", "vLLM TurboQuant",
               kEngineVllmTurboquant, G::kSkipList, false, true,
               "--kv-cache-dtype turboquant_{k8v4,4bit_nc,k3v4_nc,3bit_nc} "
               "--kv-cache-dtype-skip-layers L ... (vllm/engine/arg_utils.py: layers 0, 1 and "
               "the last two are always skipped)",
               "", kTurboquantPresets, 2},
    EngineSpec{EngineId::kTrtllm, "trtllm", "TensorRT-LLM", kEngineTrtllm, G::kRanges, true, true,
               "kv_cache_config.dtype \"0-3:fp8,4-35:nvfp4\" (TensorRT-LLM PR #13695, proposed)",
               ""},
    EngineSpec{EngineId::kModelopt, "modelopt", "ModelOpt", kEngineModelopt, G::kFree, true, true,
               "hf_quant_config.json kv_cache_quantized_layers {prefix: {quant_algo: FP8 | "
               "NVFP4}}, schema 1 (read by vLLM RFC #57445)",
               ""},
    EngineSpec{EngineId::kHf, "hf", "transformers (KVTuner)", kEngineHf, G::kFree, false, false,
               "KVTuner FlexibleQuantizedCacheConfig per_layer_config {layer: {nbits_key, "
               "nbits_value}}",
               ""},
};

}  // namespace

bool is_model_dtype(const Format& f) {
  return f.id() == FormatId::kF16 || f.id() == FormatId::kBF16;
}

std::span<const EngineSpec> all_engines() {
  return kEngines;
}

const EngineSpec& engine_spec(EngineId id) {
  for (const EngineSpec& e : kEngines) {
    if (e.id == id) return e;
  }
  fail(ErrorCode::kInternal, "engine {} has no spec", static_cast<int>(id));
}

std::string engine_names() {
  return fmt::format("{}", fmt::join(kEngines | std::views::transform(&EngineSpec::name), ", "));
}

EngineId parse_engine(std::string_view name) {
  for (const EngineSpec& e : kEngines) {
    if (e.name == name) return e.id;
  }
  fail(ErrorCode::kInvalidArgument, "--engine '{}': expected one of {}", name, engine_names());
}

bool engine_stores(const EngineSpec& engine, const Format& f) {
  if (f.is_slot()) return false;
  if (engine.format_bit == 0) return engine.not_packed.empty();
  if (is_model_dtype(f) && engine.keeps_model_dtype) return true;
  return (f.info().engines & engine.format_bit) != 0;
}

bool engine_stores(const EngineSpec& engine, const KvPair& pair) {
  if (!engine_stores(engine, pair.key) || !engine_stores(engine, pair.value)) return false;
  if (!engine.presets.empty()) {
    return (is_model_dtype(pair.key) && pair.key == pair.value) ||
           engine_preset(engine, pair) != nullptr;
  }
  return !engine.one_dtype_per_layer || pair.key == pair.value;
}

bool engine_runs_uniform(const EngineSpec& engine, const KvPair& pair, int n_layers) {
  if (!engine_stores(engine, pair)) return false;
  return engine_boundary_layers(engine, n_layers).empty() ||
         (is_model_dtype(pair.key) && is_model_dtype(pair.value));
}

std::string boundary_layers_note(const EngineSpec& engine, int n_layers) {
  const std::vector<int> boundary = engine_boundary_layers(engine, n_layers);
  if (boundary.empty()) return "";
  return fmt::format("{} keeps layers {} at the model's dtype", engine.display,
                     fmt::join(boundary, ", "));
}

const EnginePreset* engine_preset(const EngineSpec& engine, const KvPair& pair) {
  for (const EnginePreset& p : engine.presets) {
    if (KvPair::parse(p.pair) == pair) return &p;
  }
  return nullptr;
}

std::vector<int> engine_boundary_layers(const EngineSpec& engine, int n_layers) {
  const int n = std::min(engine.boundary_layers, n_layers / 2);
  std::vector<int> out;
  for (int l = 0; l < n_layers; ++l) {
    if (l < n || l >= n_layers - n) out.push_back(l);
  }
  return out;
}

std::vector<Format> engine_formats(const EngineSpec& engine) {
  std::vector<Format> out;
  for (const FormatInfo& info : all_format_infos()) {
    const Format f(info.id);
    if (engine_stores(engine, f)) out.push_back(f);
  }
  return out;
}

std::string format_list(std::span<const Format> formats, std::string_view separator) {
  return fmt::format("{}", fmt::join(formats | std::views::transform(&Format::name), separator));
}

std::string engine_format_list(const EngineSpec& engine, std::string_view separator) {
  const std::vector<Format> formats = engine_formats(engine);
  return formats.empty() ? "none kvplan packs" : format_list(formats, separator);
}

void require_packable(const EngineSpec& engine) {
  if (!engine.not_packed.empty()) {
    fail(ErrorCode::kUnimplemented, "--engine {}: {}", engine.name, engine.not_packed);
  }
}

}  // namespace kvplan
