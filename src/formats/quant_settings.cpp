#include "formats/quant_settings.h"

#include "core/error.h"

namespace kvplan {

std::string_view quant_mode_name(QuantMode mode) {
  return mode == QuantMode::kKivi ? "kivi" : "per-token";
}

QuantMode parse_quant_mode(std::string_view text) {
  if (text == "per-token") return QuantMode::kPerToken;
  if (text == "kivi") return QuantMode::kKivi;
  fail(ErrorCode::kInvalidArgument, "quantization mode '{}': expected 'per-token' or 'kivi'", text);
}

void QuantSettings::validate() const {
  if (group_size == 0 || group_size > 4096) {
    fail(ErrorCode::kInvalidArgument, "group_size {}: expected 1..4096", group_size);
  }
  if (block_size == 0 || block_size > (1u << 20)) {
    fail(ErrorCode::kInvalidArgument, "block_size {}: expected 1..1048576 tokens per page",
         block_size);
  }
  if (mode == QuantMode::kKivi && (residual_length == 0 || residual_length % group_size != 0)) {
    fail(ErrorCode::kInvalidArgument,
         "residual_length {}: kivi mode needs a positive multiple of group_size {}",
         residual_length, group_size);
  }
}

}  // namespace kvplan
