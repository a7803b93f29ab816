// Per-(layer, KV head) FP8 scales. FP8 formats store fp8(x / scale) (PackOptions::fp8_scale); a
// scale of 1 wastes most of e4m3's range on activations far below 448 and saturates any above it,
// so the profile records each head's largest |K| and |V| on the calibration text and the plan
// carries the scale that maps it onto the format's largest finite value, one per KV head and side.
//
//   KvHeadScales s = fp8_scales_for(KvPair::parse("fp8_e4m3/q4_0"), absmax_of_layer);
//   s.key_scale(h);    // absmax.key[h] / 448;  s.value is empty (q4_0 has its own scales)
#pragma once

#include <string>
#include <vector>

#include "formats/kv_pair.h"

namespace kvplan {

// The largest |x| seen per KV head: [n_kv_heads] each.
struct KvHeadAbsmax {
  std::vector<float> key;
  std::vector<float> value;
  bool operator==(const KvHeadAbsmax&) const = default;
};

// One layer's FP8 scales per KV head; a side is empty when its format is not FP8 or when the scales
// were never calibrated (then every head's scale is 1).
struct KvHeadScales {
  std::vector<float> key;
  std::vector<float> value;

  [[nodiscard]] float key_scale(int head) const { return scale_of(key, head); }
  [[nodiscard]] float value_scale(int head) const { return scale_of(value, head); }
  [[nodiscard]] bool empty() const { return key.empty() && value.empty(); }
  bool operator==(const KvHeadScales&) const = default;

 private:
  static float scale_of(const std::vector<float>& scales, int head) {
    return scales.empty() ? 1.0f : scales[static_cast<size_t>(head)];
  }
};

// One side's per-head scales for `format`: fp8_scale_for_absmax of each head's absmax when the
// format is FP8, empty otherwise. Throws Error(kInvalidArgument) for an FP8 format without absmax.
std::vector<float> fp8_head_scales(Format format, const std::vector<float>& absmax);

// The scales a layer takes with `pair`: fp8_scale_for_absmax per head on its FP8 sides, empty
// sides otherwise. Throws Error(kInvalidArgument) when an FP8 side has no absmax to calibrate from.
KvHeadScales fp8_scales_for(const KvPair& pair, const KvHeadAbsmax& absmax);
// A layer whose KV heads take different pairs (per-KV-head plans): each head's scale for its own
// formats, 1 on heads whose format keeps none; a side no head scales stays empty.
KvHeadScales fp8_scales_for_heads(const std::vector<KvPair>& head_pairs,
                                  const KvHeadAbsmax& absmax);

// Checks scales read from a file or given by a caller: each non-empty side belongs to an FP8
// format and holds n_kv_heads finite positive values. Throws Error(kInvalidArgument) naming
// `where` and the side.
void check_fp8_scales(const KvHeadScales& scales, const KvPair& pair, int n_kv_heads,
                      const std::string& where);

}  // namespace kvplan
