// The serving engines a plan can be made for: which KV formats each stores (the engines column of
// src/formats/kv_format_table.h) and how finely it lets K/V types vary across layers. `kvplan
// search/tune --engine` searches only what the engine can run; `kvplan export --to` writes it in
// the engine's own grammar. docs/engines.md has every fact here with its source.
//
//   const EngineSpec& e = engine_spec(parse_engine("ik-llamacpp"));
//   e.granularity;                      // kFirstLastN: -ctk/-ctv plus first-N / last-M types
//   engine_stores(e, KvPair::parse("q8_0/q4_0"), 64);  // true (ik_llama.cpp without -khad/-vhad)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/kv_geometry.h"
#include "formats/kv_pair.h"

namespace kvplan {

enum class EngineId {
  kKvplan,
  kLlamaCpp,
  kIkLlamaCpp,
  kVllm,
  kVllmTurboquant,
  kTrtllm,
  kModelopt,
  kHf
};

// How an engine lets K/V types differ between layers.
enum class LayerGranularity {
  kFree,        // any pair on any layer (kvplan; ModelOpt's and KVTuner's per-layer configs)
  kGlobal,      // one K type and one V type for every layer (llama.cpp -ctk/-ctv)
  kFirstLastN,  // -ctk/-ctv, then other types for the first N and last M layers (ik_llama.cpp)
  kSkipList,    // one quantized dtype, and a list of layers kept at the model's dtype (vLLM)
  kRanges,      // layer ranges, each with one dtype ("0-3:fp8,4-35:nvfp4", TensorRT-LLM)
};

// How an engine rotates K/V rows (a normalized Walsh-Hadamard transform, Q rotated alike) before
// storing them: it decides whether a cache type holds kvplan's plain format or its *_had one.
// docs/engines.md sections 5 and 6.
enum class EngineRotation {
  kNone,
  // llama.cpp since PR #21038: every quantized K and V rotated when head_dim % 64 == 0 (K in
  // blocks of the largest power of two dividing head_dim, V in blocks of 64); the environment
  // variable LLAMA_ATTN_ROT_DISABLE turns both off.
  kQuantizedByDefault,
  // ik_llama.cpp: -khad rotates every layer's K, -vhad every layer's V, in blocks of the head
  // size when it is a power of two, else of the largest of 512 ... 64 dividing it.
  kSwitchPerSide,
};

// Which sides one run of an engine stores rotated.
struct RotationSetting {
  bool keys = false;
  bool values = false;
  bool disabled_by_environment = false;  // llama.cpp run with LLAMA_ATTN_ROT_DISABLE=1

  bool operator==(const RotationSetting&) const = default;
};

// A K/V pair an engine takes only as a whole, under a name of its own (vLLM's TurboQuant presets).
struct EnginePreset {
  std::string_view name;  // "turboquant_4bit_nc"
  std::string_view pair;  // "tq_mse4/tq_int4"
};

struct EngineSpec {
  EngineId id = EngineId::kKvplan;
  std::string_view name;     // the --engine / --to value: "ik-llamacpp"
  std::string_view display;  // "ik_llama.cpp"
  uint32_t format_bit = 0;   // kEngine* of src/formats/kv_format_table.h; 0 = every format (kvplan)
  LayerGranularity granularity = LayerGranularity::kFree;
  bool one_dtype_per_layer = false;  // a layer's K and V share one dtype (vLLM, TRT-LLM, ModelOpt)
  // The engine leaves a layer at the model's 16-bit dtype (vLLM's skip list, a TRT-LLM range of
  // bf16, a layer ModelOpt's config does not quantize): f16 and bf16 pairs are runnable.
  bool keeps_model_dtype = false;
  std::string_view grammar;     // the flags or config it takes, for --help and errors
  std::string_view not_packed;  // non-empty: kvplan cannot pack this engine's formats, and why
  // Non-empty: a quantized layer holds one of these pairs, and one of them for every layer.
  std::span<const EnginePreset> presets = {};
  // The first and last N layers (N at most half the layers) stay at the model's dtype whatever
  // the configuration says (vLLM TurboQuant's boundary layers).
  int boundary_layers = 0;
  EngineRotation rotation = EngineRotation::kNone;
};

std::span<const EngineSpec> all_engines();
const EngineSpec& engine_spec(EngineId id);

// Throws Error(kInvalidArgument) naming the text and the engines ("vllm, vllm-turboquant, ...").
EngineId parse_engine(std::string_view name);
std::string engine_names();

// f16 or bf16: what an engine that keeps layers at "the model's dtype" stores them in.
bool is_model_dtype(const Format& f);

// The head_dim of every layer, or 0 when layers differ (rotation is then taken as unmodelled).
int common_head_dim(const KvGeometry& geometry);

// True when the engine stores `f` (for keys or values) at some head_dim: a *_had format when the
// engine rotates and stores its plain twin.
bool engine_stores(const EngineSpec& engine, const Format& f);

// The rotation settings the engine runs at head_dim, the one it takes with no extra flag or
// environment first: llama.cpp at head_dim % 64 == 0 {rotated, LLAMA_ATTN_ROT_DISABLE=1};
// ik_llama.cpp where its blocks are kvplan's (engine_rotation_span) {none, -khad, -vhad, -khad
// -vhad}; otherwise {none}.
std::vector<RotationSetting> rotation_settings(const EngineSpec& engine, int head_dim);
// "-khad -vhad", "K and V rotated (llama.cpp's default)", "LLAMA_ATTN_ROT_DISABLE=1", or "" for
// an engine that does not rotate.
std::string rotation_words(const EngineSpec& engine, const RotationSetting& setting);

// True when the engine, run with `setting` at head_dim, stores `f` on keys (else values): the
// rotated side holds the rotated formats of the engine's span there (*_had for the whole row,
// *_had64 for spans of 64) and no plain quantized format; 16-bit formats either way.
bool setting_stores(const EngineSpec& engine, const RotationSetting& setting, int head_dim,
                    bool keys, const Format& f);
// Both sides stored under `setting`, and the pair one layer of the engine takes (one dtype per
// layer, its presets). Says nothing about the layer structure (granularity).
bool setting_stores(const EngineSpec& engine, const RotationSetting& setting, int head_dim,
                    const KvPair& pair);
// The first setting (rotation_settings order) under which the engine stores `pair` at head_dim.
std::optional<RotationSetting> setting_for(const EngineSpec& engine, const KvPair& pair,
                                           int head_dim);
// True when some setting stores `pair` at head_dim.
bool engine_stores(const EngineSpec& engine, const KvPair& pair, int head_dim);

// True when the engine runs `pair` on every one of n_layers layers of head_dim (its boundary
// layers allow only the model's dtype).
bool engine_runs_uniform(const EngineSpec& engine, const KvPair& pair, int n_layers, int head_dim);

// The cache type an engine is given for `f`: q8_0 for q8_0_had and q8_0_had64 (the engine rotates
// it itself), `f` otherwise.
Format engine_cache_type(const Format& f);
// How the engine rotates one side at head_dim, as a kvplan rotation span (KvFormatTraits::
// rotation_span): 0 for the whole row, 64 for spans of 64; nullopt where it does not rotate or
// rotates in blocks kvplan packs no format for (llama.cpp's K at head_dim 384: blocks of 128).
// llama.cpp: K whole at a power-of-two head_dim, 64 at 192, 320, ...; V 0 at 64, else 64.
std::optional<int> engine_rotation_span(const EngineSpec& engine, int head_dim, bool keys);
// What a rotating engine stores cache type `f` as when it rotates spans of `span` values (0: the
// whole row): q8_0 -> q8_0_had or q8_0_had64; nullopt where kvplan packs no such twin (f16, ...).
std::optional<Format> rotated_twin(const Format& f, int span);

// "vLLM TurboQuant keeps layers 0, 1, 28, 29 at the model's dtype", or "" for an engine without
// boundary layers: the note a budget no plan meets gets.
std::string boundary_layers_note(const EngineSpec& engine, int n_layers);

// The preset `pair` is, or nullptr.
const EnginePreset* engine_preset(const EngineSpec& engine, const KvPair& pair);

// The layers (of n_layers) the engine keeps at the model's dtype whatever it is told, ascending.
std::vector<int> engine_boundary_layers(const EngineSpec& engine, int n_layers);

// The engine's formats in catalogue order (16-bit ones included when it keeps the model's dtype).
std::vector<Format> engine_formats(const EngineSpec& engine);

// The names of `formats` joined by `separator`: "f16, bf16, fp8_e4m3, nvfp4".
std::string format_list(std::span<const Format> formats, std::string_view separator = ", ");
// format_list of the engine's formats ("none kvplan packs" when it has none).
std::string engine_format_list(const EngineSpec& engine, std::string_view separator = ", ");

// Throws Error(kUnimplemented) for an engine whose formats kvplan does not pack (not_packed).
void require_packable(const EngineSpec& engine);

}  // namespace kvplan
