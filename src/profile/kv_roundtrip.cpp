#include "profile/kv_roundtrip.h"

#include <cstring>

#include "model/kv_cache.h"

namespace kvplan {

RowMatrix kv_roundtrip(const RowMatrix& rows, KvSide side, Format format,
                       const QuantSettings& settings, int layer, int n_kv_heads, int head_dim,
                       const std::vector<float>& fp8_head_scales) {
  // The other side is f32, which packs losslessly whatever the mode.
  const Format plain(FormatId::kF32);
  const KvPair pair = side == KvSide::kKey ? KvPair{format, plain} : KvPair{plain, format};
  KvHeadScales scales;
  (side == KvSide::kKey ? scales.key : scales.value) = fp8_head_scales;
  LayerKvCache cache(layer, {n_kv_heads, head_dim, 0}, /*exact=*/false, pair, settings,
                     std::move(scales));
  const size_t T = static_cast<size_t>(rows.rows());
  const size_t stride = static_cast<size_t>(rows.cols());
  cache.append(rows.data(), rows.data(), T, stride);
  cache.commit();
  RowMatrix out(rows.rows(), rows.cols());
  const size_t hd = static_cast<size_t>(head_dim);
  std::vector<float> head_rows(T * hd), scratch(cache.read_scratch_floats());
  for (int h = 0; h < n_kv_heads; ++h) {
    cache.read(side, h, 0, T, head_rows.data(), scratch);
    for (size_t t = 0; t < T; ++t) {
      std::memcpy(out.row(static_cast<Eigen::Index>(t)).data() + static_cast<size_t>(h) * hd,
                  head_rows.data() + t * hd, hd * sizeof(float));
    }
  }
  return out;
}

}  // namespace kvplan
