#include "model/attention.h"

#include "model/transformer.h"

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "model/logit_softcap.h"

namespace kvplan {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Queries are taken in blocks: a block's scores cover only the keys its causal (and windowed)
// rows can see, so a long prefill neither computes the masked half of Q K^T nor holds a
// [T, n_keys] matrix per head.
constexpr Eigen::Index kQueryBlock = 64;

// Softmax of row `row` over its visible columns [first, last] in place, zeros elsewhere.
void masked_softmax(Eigen::Ref<Eigen::RowVectorXf> row, Eigen::Index first, Eigen::Index last) {
  const Eigen::Index n = last + 1 - first;
  auto visible = row.segment(first, n).array();
  const float max = visible.maxCoeff();
  visible = (visible - max).exp();
  visible *= 1.0f / visible.sum();
  row.head(first).setZero();
  row.tail(row.size() - last - 1).setZero();
}

}  // namespace

void attend_chunk(const float* q, size_t q_stride, size_t n, size_t pos0, const LayerKvCache& cache,
                  const AttentionShape& shape, float* out, size_t out_stride) {
  using StridedConst = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using Strided = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  const Eigen::Index hd = shape.head_dim;
  const Eigen::Index n_keys = static_cast<Eigen::Index>(pos0 + n);
  const Eigen::Index T = static_cast<Eigen::Index>(n);
  const Eigen::Index p0 = static_cast<Eigen::Index>(pos0);
  const int group = shape.n_heads / shape.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  // First key position query position `p` sees.
  const auto first_key = [&](Eigen::Index p) {
    return shape.window > 0 ? std::max<Eigen::Index>(0, p + 1 - shape.window) : Eigen::Index{0};
  };

  const Eigen::Index blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const Eigen::Index tasks = blocks * shape.n_heads;
  // Threads only pay off above a few hundred thousand multiply-adds (tiny models, short decodes).
  const bool parallel = static_cast<double>(T) * static_cast<double>(n_keys) *
                            static_cast<double>(hd) * shape.n_heads >
                        1e6;
  const SerialEigenScope serial;  // parallel over heads and query blocks, or too small to split
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (Eigen::Index task = 0; task < tasks; ++task) {
    const int h = static_cast<int>(task / blocks);
    const Eigen::Index b0 = (task % blocks) * kQueryBlock;
    const Eigen::Index rows = std::min(kQueryBlock, T - b0);
    const int g = h / group;
    // Keys visible to any row of the block: [k0, k1].
    const Eigen::Index k0 = first_key(p0 + b0);
    const Eigen::Index k1 = p0 + b0 + rows - 1;
    const Eigen::Index span = k1 + 1 - k0;
    StridedConst qh(q + static_cast<size_t>(b0) * q_stride + static_cast<size_t>(h) * hd, rows, hd,
                    Eigen::OuterStride<>(static_cast<Eigen::Index>(q_stride)));
    Eigen::Map<const Mat> kg(cache.keys(g) + static_cast<size_t>(k0 * hd), span, hd);
    Eigen::Map<const Mat> vg(cache.values(g) + static_cast<size_t>(k0 * hd), span, hd);
    Mat scores(rows, span);
    scores.noalias() = qh * kg.transpose();
    scores *= scale;
    if (shape.logit_softcap > 0) {
      scores = scores.unaryExpr([cap = shape.logit_softcap](float s) { return soft_cap(s, cap); });
    }
    for (Eigen::Index r = 0; r < rows; ++r) {
      const Eigen::Index position = p0 + b0 + r;
      masked_softmax(scores.row(r), first_key(position) - k0, position - k0);
    }
    Strided oh(out + static_cast<size_t>(b0) * out_stride + static_cast<size_t>(h) * hd, rows, hd,
               Eigen::OuterStride<>(static_cast<Eigen::Index>(out_stride)));
    oh.noalias() = scores * vg;
  }
}

}  // namespace kvplan
