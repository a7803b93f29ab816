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

void QuantSettings::round_block_to_group() {
  block_size = (block_size + group_size - 1) / group_size * group_size;
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

bool layer_runs_kivi(const KvPair& pair, const QuantSettings& settings) {
  return settings.mode == QuantMode::kKivi || pair.key.info().per_channel_keys();
}

bool keys_packed_per_channel(const KvPair& pair, const QuantSettings& settings) {
  return layer_runs_kivi(pair, settings) && pair.key.family() != FormatFamily::kPlain;
}

void check_layer_settings(const KvPair& pair, const QuantSettings& settings,
                          std::string_view where) {
  if (pair.value.info().per_channel_keys()) {
    fail(ErrorCode::kInvalidArgument,
         "{}: value format {} packs keys per channel (KIVI); values take a per-token format such "
         "as int{}",
         where, pair.value.name(), pair.value.info().bits);
  }
  if (!layer_runs_kivi(pair, settings)) return;
  const size_t g = settings.group_size;
  if (settings.residual_length == 0 || settings.residual_length % g != 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: key format {} runs KIVI, whose residual_length ({}) must be a positive multiple of "
         "group_size {}",
         where, pair.key.name(), settings.residual_length, g);
  }
}

}  // namespace kvplan
