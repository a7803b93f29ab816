// Plan-wide quantization settings (KVTuner's modes) and the per-layer format assignment.
//
// per-token: K and V quantized per token along head_dim, groups of `group_size` (clamped to the
// row). kivi:      K per channel over groups of `group_size` consecutive tokens, V per token; the
// newest
//            tokens that do not yet fill a `residual_length` window stay in full precision (bf16).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvplan {

enum class QuantMode { kPerToken, kKivi };

std::string_view quant_mode_name(QuantMode mode);
// Throws Error(kInvalidArgument) for anything but "per-token" / "kivi".
QuantMode parse_quant_mode(std::string_view text);

struct QuantSettings {
  QuantMode mode = QuantMode::kPerToken;
  size_t group_size = 32;
  size_t residual_length = 32;  // kivi only; a multiple of group_size
  size_t block_size = 16;       // tokens per page; memory is allocated in whole pages (1 = none)

  // Throws Error(kInvalidArgument) naming the field for out-of-range values.
  void validate() const;
};

}  // namespace kvplan
