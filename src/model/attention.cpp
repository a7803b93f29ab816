#include "model/attention.h"

#include "model/transformer.h"

#include <cmath>
#include <limits>

#include <Eigen/Core>

namespace kvplan {

void attend_chunk(const float* q, size_t q_stride, size_t n, size_t pos0, const LayerKvCache& cache,
                  const AttentionShape& shape, float* out, size_t out_stride) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using StridedConst = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using Strided = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  const Eigen::Index hd = shape.head_dim;
  const Eigen::Index n_keys = static_cast<Eigen::Index>(pos0 + n);
  const Eigen::Index T = static_cast<Eigen::Index>(n);
  const int group = shape.n_heads / shape.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const float neg_inf = -std::numeric_limits<float>::infinity();

  // Threads only pay off above a few hundred thousand multiply-adds (tiny models, short decodes).
  const bool parallel = static_cast<double>(T) * static_cast<double>(n_keys) *
                            static_cast<double>(hd) * shape.n_heads >
                        1e6;
  const SerialEigenScope serial;  // parallel over heads, or too small to split
#pragma omp parallel for schedule(static) if (parallel)
  for (int h = 0; h < shape.n_heads; ++h) {
    const int g = h / group;
    StridedConst qh(q + static_cast<size_t>(h) * hd, T, hd,
                    Eigen::OuterStride<>(static_cast<Eigen::Index>(q_stride)));
    Eigen::Map<const Mat> kg(cache.keys(g), n_keys, hd);
    Eigen::Map<const Mat> vg(cache.values(g), n_keys, hd);
    Mat scores = (qh * kg.transpose()) * scale;  // [T, n_keys]
    for (Eigen::Index t = 0; t < T; ++t) {
      const Eigen::Index last =
          static_cast<Eigen::Index>(pos0) + t;  // causal: keys <= own position
      Eigen::Index first = 0;
      if (shape.window > 0 && last + 1 > shape.window) first = last + 1 - shape.window;
      auto row = scores.row(t);
      for (Eigen::Index j = 0; j < first; ++j) row[j] = neg_inf;
      for (Eigen::Index j = last + 1; j < n_keys; ++j) row[j] = neg_inf;
      const float max = row.segment(first, last + 1 - first).maxCoeff();
      float sum = 0.0f;
      for (Eigen::Index j = first; j <= last; ++j) {
        const float e = std::exp(row[j] - max);
        row[j] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
      for (Eigen::Index j = first; j <= last; ++j) row[j] *= inv;
      for (Eigen::Index j = 0; j < first; ++j) row[j] = 0.0f;
      for (Eigen::Index j = last + 1; j < n_keys; ++j) row[j] = 0.0f;
    }
    Strided oh(out + static_cast<size_t>(h) * hd, T, hd,
               Eigen::OuterStride<>(static_cast<Eigen::Index>(out_stride)));
    oh.noalias() = scores * vg;
  }
}

}  // namespace kvplan
