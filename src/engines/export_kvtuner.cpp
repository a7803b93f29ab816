// KVTuner's layer-wise precision file for a plan. Facts about KVTuner (cmd2001/KVTuner,
// flexible_quant/flexible_quantized_cache.py and vanilla_quantizer.py):
// - FlexibleQuantizedCacheConfig(per_layer_quant=True, per_layer_config_path=...) loads the YAML
//   and reads only per_layer_config[layer]['nbits_key'] / ['nbits_value']; every layer goes
//   through _quantize, so a layer cannot be left unquantized;
// - asym, axis_key/axis_value (0 per token, 1 per channel), q_group_size (-1 = a whole row),
//   residual_length and force_quant (quantize during prefill) are constructor arguments, one value
//   for every layer;
// - bit widths: the quanto backend has qint2/4/8, HQQ takes 1/2/3/4/8, and the Vanilla backend
//   clips codes to nbits but stores them as int8, so 8 is the widest width all three take;
// - Vanilla's asymmetric quantizer: scale = (max - min) / (2^b - 1), zero = round(min / scale) -
//   q_min, x ~ (code + zero) * scale: its grid sits on whole multiples of the scale.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "engines/exporters.h"

namespace kvplan {
namespace {

constexpr int kWidestKvTunerBits = 8;

// The nbits written for a format: its bits for the int formats, the widest KVTuner width for a
// 16-bit one, else the bits of the int format nearest it (the fewest at or above its own).
int kvtuner_bits(const Format& f, int head_dim) {
  if (f.family() == FormatFamily::kUniformInt) return f.info().bits;
  if (f.family() == FormatFamily::kPlain) return kWidestKvTunerBits;
  return nearest_engine_format(engine_spec(EngineId::kHf), f, head_dim).info().bits;
}

}  // namespace

PlanExport export_kvtuner_yaml(const Plan& plan) {
  PlanExport e;
  const QuantSettings& q = plan.quantization;
  // KVTuner's axis_key is one setting for every layer: per channel (KIVI) when the plan's mode is
  // kivi or most of its quantized keys are per channel; the other layers' keys are losses.
  int per_channel_keys = 0, per_token_keys = 0;
  for (const PlanLayer& l : plan.layers) {
    if (l.pair.key.family() != FormatFamily::kUniformInt) continue;
    ++(keys_packed_per_channel(l.pair, q) ? per_channel_keys : per_token_keys);
  }
  const bool kivi =
      q.mode == QuantMode::kKivi || (per_channel_keys > 0 && per_channel_keys >= per_token_keys);
  const size_t head_dim =
      plan.layers.empty() ? 0 : static_cast<size_t>(plan.model.geometry.layers.front().head_dim);
  // KVTuner's q_group_size: consecutive values of one row (per token) or, on axis 1, consecutive
  // tokens of one channel (KIVI keys); -1 = the whole row (per-token only).
  const int64_t q_group_size =
      kivi || q.group_size < head_dim ? static_cast<int64_t>(q.group_size) : -1;
  const size_t kvtuner_row_group = q.group_size < head_dim ? q.group_size : head_dim;

  std::string layers_yaml;
  bool any_int = false;
  for (const PlanLayer& l : plan.layers) {
    const int kb = kvtuner_bits(l.pair.key, static_cast<int>(head_dim)),
              vb = kvtuner_bits(l.pair.value, static_cast<int>(head_dim));
    layers_yaml += fmt::format("{}:\n  nbits_key: {}\n  nbits_value: {}\n", l.index, kb, vb);
    // What KVTuner runs, in kvplan's int formats of the plan's group (its quantizer rounds
    // differently: the plan-wide "quantizer" loss below).
    e.runs.push_back({Format::parse(fmt::format("int{}{}", kb, kivi ? "_kivi" : "")),
                      Format::parse(fmt::format("int{}", vb))});
    for (const auto& [side, f] : {std::pair{"key", l.pair.key}, std::pair{"value", l.pair.value}}) {
      if (f.family() == FormatFamily::kPlain) {
        e.losses.push_back(
            {l.index, side, f.name(), fmt::format("{} bits", kWidestKvTunerBits),
             "KVTuner quantizes every layer; 8 is the widest nbits its quanto, HQQ and Vanilla "
             "backends all take (Vanilla stores codes as int8)"});
        continue;
      }
      if (f.family() != FormatFamily::kUniformInt) {
        e.losses.push_back(
            {l.index, side, f.name(), fmt::format("{} bits", std::string(side) == "key" ? kb : vb),
             "KVTuner's nbits are int formats: the fewest bits at or above the plan's"});
        continue;
      }
      any_int = true;
      const bool key_side = std::string(side) == "key";
      if (key_side && keys_packed_per_channel(l.pair, q) != kivi) {
        const char* planned = kivi ? "per token" : "per channel (KIVI)";
        const char* written = kivi ? "per channel (KIVI)" : "per token";
        e.losses.push_back({l.index, "key axis", fmt::format("{} {}", f.name(), planned),
                            fmt::format("{} bits {}", f.info().bits, written),
                            "KVTuner's axis_key is one setting for every layer"});
      }
      // Groups: KVTuner's q_group_size is one setting for every layer and both sides.
      const bool channel_groups = kivi && key_side;
      const size_t n = channel_groups ? q.group_size : head_dim;
      const size_t planned_group = effective_group_size(f, n, q.group_size);
      const size_t kvtuner_group = channel_groups ? q.group_size : kvtuner_row_group;
      if (planned_group != kvtuner_group) {
        e.losses.push_back({l.index, std::string(side) + " group_size",
                            fmt::format("{} in groups of {}", f.name(), planned_group),
                            fmt::format("{} bits in groups of {}", f.info().bits, kvtuner_group),
                            "KVTuner's q_group_size is one setting for every layer"});
      }
    }
  }
  if (!kivi && q.group_size < head_dim && head_dim % q.group_size != 0) {
    e.losses.push_back({-1, "group_size", std::to_string(q.group_size),
                        std::to_string(q.group_size),
                        fmt::format("KVTuner reshapes K and V into rows of q_group_size values, "
                                    "which needs head_dim {} to be a multiple of it",
                                    head_dim)});
  }
  if (kivi && (q.group_size > head_dim || head_dim % q.group_size != 0)) {
    // One q_group_size: KIVI keys need it in tokens, and values then use it along head_dim,
    // where the plan clamps it to the row.
    e.losses.push_back({-1, "value group_size", std::to_string(kvtuner_row_group),
                        std::to_string(q.group_size),
                        fmt::format("KVTuner has one q_group_size for key tokens and value rows; "
                                    "value rows of {} cannot be cut into groups of {}",
                                    head_dim, q.group_size)});
  }
  if (any_int) {
    e.losses.push_back(
        {-1, "quantizer", "x = min + code * scale (f16 min and scale)",
         "x = (code + round(min / scale) - q_min) * scale",
         "KVTuner's Vanilla quantizer puts its grid on whole multiples of the scale, the plan's "
         "int formats start it at the group minimum: same bits and groups, values may differ by "
         "up to half a step, so the plan's measured quality is an estimate for KVTuner"});
  }

  e.text = fmt::format(
      "# KVTuner layer-wise precision for {} ({} layers), generated by kvplan {}\n"
      "# KVTuner reads only nbits_key/nbits_value per layer from this file; the plan's other\n"
      "# settings are constructor arguments:\n"
      "#   FlexibleVanillaQuantizedCache(FlexibleQuantizedCacheConfig(\n"
      "#       per_layer_quant=True, per_layer_config_path=\"<this file>\", asym=True,\n"
      "#       axis_key={}, axis_value=0, q_group_size={}, residual_length={}, "
      "force_quant=True))\n",
      plan.model.name, plan.layers.size(), plan.tool_version, kivi ? 1 : 0, q_group_size,
      kivi ? q.residual_length : 0);
  e.text += layers_yaml;
  e.notes.push_back(fmt::format(
      "pass the settings in the file's header to KVTuner: '{}' mode is axis_key={}, axis_value=0, "
      "q_group_size={}{}; asym=True as the plan's int formats are asymmetric (KVTuner honours it "
      "in the Vanilla backend only); force_quant=True so a prompt's own attention reads its "
      "quantized K/V, as kvplan measures by default",
      kivi ? "kivi" : "per-token", kivi ? 1 : 0, q_group_size,
      kivi ? fmt::format(", residual_length={}", q.residual_length) : ", residual_length=0"));
  return e;
}

}  // namespace kvplan
