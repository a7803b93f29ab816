#include "engines/engine.h"

#include <algorithm>
#include <array>
#include <ranges>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace kvplan {
namespace {

using G = LayerGranularity;

// vLLM's TQ_PRESETS (turboquant/config.py): key bits 8 = FP8 keys, else Lloyd-Max keys; uniform
// values. docs/engines.md section 2.
constexpr std::array kTurboquantPresets{
    EnginePreset{"turboquant_k8v4", "tq_fp8/tq_int4"},
    EnginePreset{"turboquant_4bit_nc", "tq_mse4/tq_int4"},
    EnginePreset{"turboquant_k3v4_nc", "tq_mse3/tq_int4"},
    EnginePreset{"turboquant_3bit_nc", "tq_mse3/tq_int3"},
};

constexpr std::array kEngines{
    EngineSpec{EngineId::kKvplan, "kvplan", "kvplan", 0, G::kFree, false, true,
               "plan.json, read by kvplan's runtime library and C API", ""},
    EngineSpec{EngineId::kLlamaCpp,
               "llamacpp",
               "llama.cpp",
               kEngineLlamaCpp,
               G::kGlobal,
               false,
               true,
               "-ctk TYPE -ctv TYPE (common/arg.cpp; a quantized V needs -fa on; quantized K/V "
               "rotated at head_dim % 64 == 0 unless LLAMA_ATTN_ROT_DISABLE is set, PR #21038)",
               "",
               {},
               0,
               EngineRotation::kQuantizedByDefault},
    EngineSpec{EngineId::kIkLlamaCpp,
               "ik-llamacpp",
               "ik_llama.cpp",
               kEngineIkLlamaCpp,
               G::kFirstLastN,
               false,
               true,
               "-ctk/-ctv TYPE, -ctk-first/-ctk-last/-ctv-first/-ctv-last TYPE,N (ik_llama.cpp "
               "PR #1599), -khad/-vhad (every layer's K/V rotated)",
               "",
               {},
               0,
               EngineRotation::kSwitchPerSide},
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

bool is_power_of_two(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

// The largest power of two dividing n > 0.
int power_of_two_part(int n) {
  return n & -n;
}

// Both sides' formats aside, whether one layer of the engine takes the pair as a whole.
bool layer_takes(const EngineSpec& engine, const KvPair& pair) {
  if (!engine.presets.empty()) {
    return (is_model_dtype(pair.key) && pair.key == pair.value) ||
           engine_preset(engine, pair) != nullptr;
  }
  return !engine.one_dtype_per_layer || pair.key == pair.value;
}

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

int common_head_dim(const KvGeometry& geometry) {
  if (geometry.layers.empty()) return 0;
  const int d = geometry.layers.front().head_dim;
  for (const KvLayerGeometry& l : geometry.layers) {
    if (l.head_dim != d) return 0;
  }
  return d;
}

std::optional<int> engine_rotation_span(const EngineSpec& engine, int head_dim, bool keys) {
  if (head_dim <= 0 || head_dim > kMaxRotatedRow) return std::nullopt;
  // The engine's block of values rotated together at head_dim (0: it does not rotate there).
  int block = 0;
  switch (engine.rotation) {
    case EngineRotation::kNone:
      return std::nullopt;
    case EngineRotation::kQuantizedByDefault:
      // llama.cpp: K in blocks of the largest power of two dividing head_dim, V in blocks of 64.
      if (head_dim % kHadamardSpan != 0) return std::nullopt;
      block = keys ? power_of_two_part(head_dim) : kHadamardSpan;
      break;
    case EngineRotation::kSwitchPerSide:
      // ik_llama.cpp's hadamard_size(): the head size when it is a power of two, else the
      // largest of 512 ... 64 dividing it.
      if (is_power_of_two(head_dim)) {
        block = head_dim;
      } else {
        for (int b = 512; b >= kHadamardSpan && block == 0; b /= 2) {
          if (head_dim % b == 0) block = b;
        }
      }
      break;
  }
  if (block == head_dim) return 0;  // the whole row: *_had (at 64 the same bytes as *_had64)
  if (block == kHadamardSpan) return kHadamardSpan;
  return std::nullopt;  // not rotated, or in blocks kvplan packs no format for (128 of 384)
}

// The twins come from the format table: a rotated format's codec wraps its cache type's.
std::optional<Format> rotated_twin(const Format& f, int span) {
  if (f.is_slot()) return std::nullopt;
  for (const KvFormatTraits& info : format_table()) {
    if (codec_traits(info.codec).inner == f.info().codec && info.rotation_span() == span) {
      return Format(info.id);
    }
  }
  return std::nullopt;
}

Format engine_cache_type(const Format& f) {
  const Codec inner = f.is_slot() ? Codec::kNone : codec_traits(f.info().codec).inner;
  if (inner == Codec::kNone) return f;
  for (const KvFormatTraits& info : format_table()) {
    if (info.codec == inner) return Format(info.id);
  }
  return f;
}

bool engine_stores(const EngineSpec& engine, const Format& f) {
  if (f.is_slot()) return false;
  if (engine.format_bit == 0) return engine.not_packed.empty();
  if (is_model_dtype(f) && engine.keeps_model_dtype) return true;
  if ((f.info().engines & engine.format_bit) != 0) return true;
  const Format plain = engine_cache_type(f);
  return engine.rotation != EngineRotation::kNone && plain != f &&
         (plain.info().engines & engine.format_bit) != 0;
}

std::vector<RotationSetting> rotation_settings(const EngineSpec& engine, int head_dim) {
  switch (engine.rotation) {
    case EngineRotation::kNone:
      return {{}};
    case EngineRotation::kQuantizedByDefault:
      // Layers of different head_dim (0): only the environment variable makes every layer's
      // storage known.
      if (head_dim == 0) return {{false, false, true}};
      if (head_dim % 64 != 0) return {{}};
      return {{true, true, false}, {false, false, true}};
    case EngineRotation::kSwitchPerSide: {
      std::vector<RotationSetting> out{{}};
      const bool k = engine_rotation_span(engine, head_dim, true).has_value(),
                 v = engine_rotation_span(engine, head_dim, false).has_value();
      if (k) out.push_back({true, false, false});
      if (v) out.push_back({false, true, false});
      if (k && v) out.push_back({true, true, false});
      return out;
    }
  }
  return {{}};
}

std::string rotation_words(const EngineSpec& engine, const RotationSetting& setting) {
  switch (engine.rotation) {
    case EngineRotation::kNone:
      return "";
    case EngineRotation::kQuantizedByDefault:
      if (setting.disabled_by_environment) return "LLAMA_ATTN_ROT_DISABLE=1 (nothing rotated)";
      if (setting.keys || setting.values) return "quantized K and V rotated (llama.cpp's default)";
      return "nothing rotated (head_dim not a multiple of 64)";
    case EngineRotation::kSwitchPerSide:
      if (setting.keys && setting.values) return "-khad -vhad";
      if (setting.keys) return "-khad";
      if (setting.values) return "-vhad";
      return "no -khad/-vhad";
  }
  return "";
}

bool setting_stores(const EngineSpec& engine, const RotationSetting& setting, int head_dim,
                    bool keys, const Format& f) {
  if (!engine_stores(engine, f)) return false;
  if (engine.rotation == EngineRotation::kNone || f.family() == FormatFamily::kPlain) {
    // 16-bit caches: llama.cpp never rotates them; ik_llama.cpp's rotation of one is
    // orthogonal, its f16 rounding of the same size, so it is taken as the same format.
    return true;
  }
  const bool rotated = keys ? setting.keys : setting.values;
  if (engine_cache_type(f) != f) {
    return rotated && engine_rotation_span(engine, head_dim, keys) == f.info().rotation_span();
  }
  return !rotated;
}

bool setting_stores(const EngineSpec& engine, const RotationSetting& setting, int head_dim,
                    const KvPair& pair) {
  return setting_stores(engine, setting, head_dim, true, pair.key) &&
         setting_stores(engine, setting, head_dim, false, pair.value) && layer_takes(engine, pair);
}

std::optional<RotationSetting> setting_for(const EngineSpec& engine, const KvPair& pair,
                                           int head_dim) {
  for (const RotationSetting& s : rotation_settings(engine, head_dim)) {
    if (setting_stores(engine, s, head_dim, pair)) return s;
  }
  return std::nullopt;
}

bool engine_stores(const EngineSpec& engine, const KvPair& pair, int head_dim) {
  return setting_for(engine, pair, head_dim).has_value();
}

bool engine_runs_uniform(const EngineSpec& engine, const KvPair& pair, int n_layers, int head_dim) {
  if (!engine_stores(engine, pair, head_dim)) return false;
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
  for (const KvFormatTraits& info : format_table()) {
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
