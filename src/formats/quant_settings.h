// Plan-wide quantization settings (KVTuner's modes) and which layers run KIVI's scheme.
//
// per-token: K and V quantized per token along head_dim, groups of `group_size` (clamped to the
//            row).
// kivi:      K per channel over groups of `group_size` consecutive tokens, V per token; the newest
//            tokens that do not yet fill a `residual_length` window stay in full precision (bf16).
// A per-token plan may still run KIVI on some layers: those whose key format is a per-channel one
// (int4_kivi, ...; KvFormatTraits::per_channel_keys), so the search chooses KIVI keys per layer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "formats/kv_pair.h"

namespace kvplan {

enum class QuantMode { kPerToken, kKivi };

std::string_view quant_mode_name(QuantMode mode);
// Throws Error(kInvalidArgument) for anything but "per-token" / "kivi".
QuantMode parse_quant_mode(std::string_view text);

struct QuantSettings {
  QuantMode mode = QuantMode::kPerToken;
  size_t group_size = 32;
  size_t residual_length = 32;  // kivi only; a multiple of group_size
  // Tokens per page; memory is allocated in whole pages (1 = none). 32, not vLLM's 16, so pages
  // hold whole per-channel key groups of the default group_size.
  size_t block_size = 32;

  // Rounds block_size up to a multiple of group_size, so pages hold whole per-channel key groups.
  void round_block_to_group();
  // Throws Error(kInvalidArgument) naming the field for out-of-range values.
  void validate() const;
  bool operator==(const QuantSettings&) const = default;
};

// Whether a layer with `pair` runs KIVI's scheme: the plan's mode is kivi, or its key format is a
// per-channel one.
bool layer_runs_kivi(const KvPair& pair, const QuantSettings& settings);
// Whether its keys are packed per channel (a KIVI layer whose keys are not f32/f16/bf16).
bool keys_packed_per_channel(const KvPair& pair, const QuantSettings& settings);
// Throws Error(kInvalidArgument) naming `where` when the layer cannot be held: a per-channel
// format for values, or a KIVI layer whose residual_length is not a positive multiple of
// group_size. (Pages must also hold whole per-channel groups: the runtime's PlanLayout checks.)
void check_layer_settings(const KvPair& pair, const QuantSettings& settings,
                          std::string_view where);

}  // namespace kvplan
