// Exports of a plan to what serving engines accept today. Engines take one global KV type (or a
// few), so an export says plainly what it keeps of the plan and lists, per layer and field,
// everything the engine will do differently.
//
//   kvplan::PlanExport e = kvplan::export_llamacpp(plan);
//   e.text;     // "-ctk q8_0 -ctv q4_0 -fa on"
//   e.notes;    // why this pair, how to use it
//   e.losses;   // {layer 3, "key", "int4", "q8_0", "llama.cpp applies one -ctk type ..."}, ...
//   e.exact();  // true only when nothing is lost
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engines/engine.h"
#include "plan/plan.h"

namespace kvplan {

// One thing the engine gets differently from the plan.
struct ExportLoss {
  int layer = -1;        // -1: a plan-wide setting, or every layer alike
  std::string field;     // "key", "value", "mode", "group_size", "quantizer", ...
  std::string planned;   // what the plan says
  std::string exported;  // what the export gives the engine instead
  std::string reason;    // why the engine cannot take the plan's value

  bool operator==(const ExportLoss&) const = default;
};

struct PlanExport {
  std::string text;                // what to paste: flags, arguments or a YAML file
  std::vector<std::string> notes;  // why this configuration, and how to use it
  std::vector<ExportLoss> losses;  // every layer and field the engine gets differently
  // Per plan layer, the pair the engine will run: the plan's own where nothing is lost. A 16-bit
  // layer an engine keeps at "the model's dtype" is written bf16/bf16.
  std::vector<KvPair> runs;

  [[nodiscard]] bool exact() const { return losses.empty(); }
};

// One line per distinct loss, its layers listed in ranges:
// "layers 0-3, 7 key: fp8_e5m2 -> fp8_e4m3 (vLLM takes one fp8 dtype ...)".
std::vector<std::string> describe_losses(const std::vector<ExportLoss>& losses);

// llama.cpp (-ctk/-ctv): the best measured global pair of llama.cpp cache types within the plan's
// memory (from the plan's baselines), else the largest that is no bigger than the plan. A pair of
// rotated formats (q8_0_had/q4_0_had) is what llama.cpp stores by default at head_dim % 64 == 0;
// an unrotated quantized pair there gets a first line "export LLAMA_ATTN_ROT_DISABLE=1".
PlanExport export_llamacpp(const Plan& plan);

// vLLM (--kv-cache-dtype, --kv-cache-dtype-skip-layers): one dtype for K and V of every layer,
// either fp8 (one variant for all quantized layers) or the model's own (skipped layers). A layer
// with a 16-bit side is skipped; the fp8 variant is the one more of the plan's fp8 K/V sides use
// (fp8_e4m3 on a tie); every other format becomes that fp8 variant, listed as a loss.
PlanExport export_vllm(const Plan& plan);

// KVTuner's per-layer YAML {layer: {nbits_key, nbits_value}} (cmd2001/KVTuner, read by
// FlexibleQuantizedCacheConfig(per_layer_config_path=...)) for int formats, with the plan-wide
// settings KVTuner takes as constructor arguments in its header comment. KVTuner quantizes every
// layer, so a 16-bit side is written as 8 bits, and another format as the int bits nearest it
// (q4_0 -> 4, fp8 -> 8), each listed as a loss.
PlanExport export_kvtuner_yaml(const Plan& plan);

// ik_llama.cpp: -ctk/-ctv for most layers and -ctk-first/-ctk-last/-ctv-first/-ctv-last TYPE,N
// for the first N and last M layers (PR #1599), -khad/-vhad where a side's layers are rotated
// (*_had). A side's layers between its first and last runs that differ take the widest type among
// them; formats ik_llama.cpp lacks, or that the side's rotation setting does not store, take the
// nearest one.
PlanExport export_ik_llamacpp(const Plan& plan);

// vLLM TurboQuant: --kv-cache-dtype turboquant_* (one K/V preset for every quantized layer) and
// --kv-cache-dtype-skip-layers; the first and last two layers always stay at the model's dtype.
PlanExport export_vllm_turboquant(const Plan& plan);

// TensorRT-LLM: kv_cache_config.dtype as layer ranges, "0-3:fp8,4-29:nvfp4" (PR #13695), in a
// YAML file for --extra_llm_api_options. A layer takes one dtype: its wider side's.
PlanExport export_trtllm(const Plan& plan);

// ModelOpt's per-layer KV config (hf_quant_config.json: kv_cache_quant_algo MIXED_PRECISION,
// kv_cache_quantized_layers {"model.layers.N.self_attn": {"quant_algo": "FP8" | "NVFP4"}},
// kv_cache_schema_version 1), as vLLM's RFC #57445 reads it. 16-bit layers are not listed.
PlanExport export_modelopt(const Plan& plan);

// The format an engine stores in place of `f`: `f` itself when it stores it, else the one with the
// fewest bits at or above f's (same family first, then the lower mean KL among `measured`, the
// plan's uniform baselines), else its widest; only formats that pack rows of head_dim values.
// Throws Error(kUnimplemented) when none does.
Format nearest_engine_format(const EngineSpec& engine, const Format& f, int head_dim,
                             const std::vector<UniformBaseline>& measured = {});
// The same among the engine's formats `stored` accepts (a rotation setting's side).
Format nearest_stored_format(const EngineSpec& engine, const Format& f, int head_dim,
                             const std::vector<UniformBaseline>& measured,
                             const std::function<bool(const Format&)>& stored);

// The export for an engine (hf: KVTuner's YAML). Throws Error(kInvalidArgument) when the engine
// stores none of the plan's formats, naming them and the `--engine` search that gives a plan it
// runs; Error(kUnimplemented) for an engine whose formats kvplan does not pack.
PlanExport export_plan(const Plan& plan, EngineId engine);

}  // namespace kvplan
