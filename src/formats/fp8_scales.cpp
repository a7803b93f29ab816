#include "formats/fp8_scales.h"

#include <cmath>

#include "core/error.h"
#include "formats/pack.h"

namespace kvplan {
namespace {

void check_side(const std::vector<float>& scales, Format format, int n_kv_heads,
                const std::string& where, const char* side) {
  if (scales.empty()) return;
  if (!format.has_tensor_scale()) {
    fail(ErrorCode::kInvalidArgument,
         "{}: {}_fp8_scales given for {} format {}, which keeps no per-head scale (FP8 and NVFP4 "
         "do)",
         where, side, side, format.name());
  }
  if (scales.size() != static_cast<size_t>(n_kv_heads)) {
    fail(ErrorCode::kInvalidArgument,
         "{}: {}_fp8_scales has {} entries, expected one per KV head ({})", where, side,
         scales.size(), n_kv_heads);
  }
  for (size_t h = 0; h < scales.size(); ++h) {
    if (!(scales[h] > 0.0f) || !std::isfinite(scales[h])) {
      fail(ErrorCode::kInvalidArgument, "{}: {}_fp8_scales[{}] is {}, expected a finite value > 0",
           where, side, h, scales[h]);
    }
  }
}

}  // namespace

std::vector<float> fp8_head_scales(Format format, const std::vector<float>& absmax) {
  if (!format.has_tensor_scale()) return {};
  if (absmax.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "format {} needs per-head FP8 scales, but no absmax was calibrated for it", format.name());
  }
  std::vector<float> out;
  out.reserve(absmax.size());
  for (const float a : absmax) out.push_back(fp8_scale_for_absmax(format, a));
  return out;
}

KvHeadScales fp8_scales_for(const KvPair& pair, const KvHeadAbsmax& absmax) {
  return {fp8_head_scales(pair.key, absmax.key), fp8_head_scales(pair.value, absmax.value)};
}

void check_fp8_scales(const KvHeadScales& scales, const KvPair& pair, int n_kv_heads,
                      const std::string& where) {
  check_side(scales.key, pair.key, n_kv_heads, where, "key");
  check_side(scales.value, pair.value, n_kv_heads, where, "value");
}

KvHeadScales fp8_scales_for_heads(const std::vector<KvPair>& head_pairs,
                                  const KvHeadAbsmax& absmax) {
  const auto side = [&](bool keys) {
    const std::vector<float>& maxima = keys ? absmax.key : absmax.value;
    std::vector<float> out;
    for (size_t h = 0; h < head_pairs.size(); ++h) {
      const Format f = keys ? head_pairs[h].key : head_pairs[h].value;
      if (!f.has_tensor_scale()) continue;
      if (maxima.size() != head_pairs.size()) {
        fail(ErrorCode::kInvalidArgument,
             "format {} needs per-head FP8 scales, but {} KV head maxima were calibrated for {} "
             "heads",
             f.name(), maxima.size(), head_pairs.size());
      }
      out.resize(head_pairs.size(), 1.0f);
      out[h] = fp8_scale_for_absmax(f, maxima[h]);
    }
    return out;
  };
  return {side(true), side(false)};
}

}  // namespace kvplan
