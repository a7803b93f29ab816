#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "formats/math/hadamard.h"
#include "model/logit_softcap.h"
#include "model/transformer.h"

namespace kvplan {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Queries are taken in blocks of kQueryBlock positions, every query head of one KV head together
// (GQA: their keys and values are unpacked once); keys in tiles of kKeyTile positions, aligned to
// multiples of kKeyTile, read from the cache's pages into per-thread buffers. A block visits only
// the tiles its causal (and windowed) rows can see, and folds them into a running softmax, so no
// [T, n_keys] matrix and no f32 copy of the cache exist. A decode step takes scores and sums of
// rotated rows in the rotated domain: equal to the row domain's up to rounding, not bit for bit.
constexpr Eigen::Index kQueryBlock = 64;
constexpr size_t kKeyTile = 128;

// One thread's buffers, kept between calls (grown, never shrunk).
struct TileBuffers {
  Mat queries, keys, values, scores, out;
  std::vector<float> max, sum, scratch;
};

TileBuffers& thread_buffers() {
  thread_local TileBuffers buffers;
  return buffers;
}

}  // namespace

void attend_chunk(const float* q, size_t q_stride, size_t n, size_t pos0, const LayerKvCache& cache,
                  const AttentionShape& shape, float* out, size_t out_stride) {
  const Eigen::Index hd = shape.head_dim;
  const Eigen::Index n_keys = static_cast<Eigen::Index>(pos0 + n);
  const Eigen::Index T = static_cast<Eigen::Index>(n);
  const Eigen::Index p0 = static_cast<Eigen::Index>(pos0);
  const int group = shape.n_heads / shape.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  constexpr float kNoScore = -std::numeric_limits<float>::infinity();
  // First key position query position `p` sees.
  const auto first_key = [&](Eigen::Index p) {
    return shape.window > 0 ? std::max<Eigen::Index>(0, p + 1 - shape.window) : Eigen::Index{0};
  };

  const Eigen::Index blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const Eigen::Index tasks = blocks * shape.n_kv_heads;
  // Threads only pay off above a few hundred thousand multiply-adds (tiny models, short decodes).
  const bool parallel = static_cast<double>(T) * static_cast<double>(n_keys) *
                            static_cast<double>(hd) * shape.n_heads >
                        1e6;
  // A decode step (one query position) reads rotated formats in their rotated domain
  // (formats/kv_row_format.h kHasRotatedDomain): its few query rows are rotated once, and their
  // weighted sums of values rotated back once, instead of every cached key and value row it reads
  // (decode tokens/s of SmolLM2's plan-6480 at 4K context: 0.84x -> 0.90x of bf16). A prefill
  // block shares each row's unrotation among its 64 x group query rows, so prefill keeps the
  // row-domain reads, and with them the bits eval, profile and search measure.
  const bool rotated_domain = n == 1;
  const int key_span = rotated_domain ? cache.rotation_span(KvSide::kKey) : 0;
  const int value_span = rotated_domain ? cache.rotation_span(KvSide::kValue) : 0;
  const SerialEigenScope serial;  // parallel over KV heads and query blocks, or too small to split
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (Eigen::Index task = 0; task < tasks; ++task) {
    const int g = static_cast<int>(task / blocks);
    const Eigen::Index b0 = (task % blocks) * kQueryBlock;
    const Eigen::Index rows = std::min(kQueryBlock, T - b0);
    const Eigen::Index R =
        rows * group;  // row i: query head g * group + i / rows, position i % rows
    TileBuffers& b = thread_buffers();
    b.queries.resize(R, hd);
    for (Eigen::Index i = 0; i < R; ++i) {
      const int h = g * group + static_cast<int>(i / rows);
      const float* src = q + static_cast<size_t>(b0 + i % rows) * q_stride +
                         static_cast<size_t>(h) * static_cast<size_t>(hd);
      std::copy(src, src + hd, b.queries.row(i).data());
      if (key_span > 0) hadamard_transform_spans(b.queries.row(i).data(), shape.head_dim, key_span);
    }
    b.out.setZero(R, hd);
    b.max.assign(static_cast<size_t>(R), kNoScore);
    b.sum.assign(static_cast<size_t>(R), 0.0f);
    b.scratch.resize(cache.read_scratch_floats());
    // Keys visible to any row of the block: [k0, k1].
    const Eigen::Index k0 = first_key(p0 + b0);
    const Eigen::Index k1 = p0 + b0 + rows - 1;
    for (Eigen::Index t0 = k0; t0 <= k1;) {
      const Eigen::Index t1 =
          std::min<Eigen::Index>(k1 + 1, (t0 / static_cast<Eigen::Index>(kKeyTile) + 1) * kKeyTile);
      const Eigen::Index nt = t1 - t0;
      b.keys.resize(nt, hd);
      cache.read(KvSide::kKey, g, static_cast<size_t>(t0), static_cast<size_t>(nt), b.keys.data(),
                 b.scratch, key_span > 0);
      b.scores.resize(R, nt);
      b.scores.noalias() = b.queries * b.keys.transpose();
      b.scores *= scale;
      if (shape.logit_softcap > 0) {
        b.scores =
            b.scores.unaryExpr([cap = shape.logit_softcap](float s) { return soft_cap(s, cap); });
      }
      // Each row's visible part of the tile joins its running softmax: scores become weights
      // exp(s - max) (zero where hidden), the row's sum and output rescaled to the new max.
      for (Eigen::Index i = 0; i < R; ++i) {
        const Eigen::Index position = p0 + b0 + i % rows;
        const Eigen::Index lo = std::max(first_key(position), t0) - t0;
        const Eigen::Index hi = std::min(position, t1 - 1) - t0;
        auto row = b.scores.row(i);
        if (lo > hi) {
          row.setZero();
          continue;
        }
        auto visible = row.segment(lo, hi + 1 - lo).array();
        float& max = b.max[static_cast<size_t>(i)];
        const float new_max = std::max(max, visible.maxCoeff());
        const float rescale = std::exp(max - new_max);
        visible = (visible - new_max).exp();
        row.head(lo).setZero();
        row.tail(nt - hi - 1).setZero();
        b.sum[static_cast<size_t>(i)] = b.sum[static_cast<size_t>(i)] * rescale + visible.sum();
        b.out.row(i) *= rescale;
        max = new_max;
      }
      b.values.resize(nt, hd);
      cache.read(KvSide::kValue, g, static_cast<size_t>(t0), static_cast<size_t>(nt),
                 b.values.data(), b.scratch, value_span > 0);
      b.out.noalias() += b.scores * b.values;
      t0 = t1;
    }
    for (Eigen::Index i = 0; i < R; ++i) {
      const int h = g * group + static_cast<int>(i / rows);
      float* dst = out + static_cast<size_t>(b0 + i % rows) * out_stride +
                   static_cast<size_t>(h) * static_cast<size_t>(hd);
      if (value_span > 0) hadamard_transform_spans(b.out.row(i).data(), shape.head_dim, value_span);
      const float inverse = 1.0f / b.sum[static_cast<size_t>(i)];
      for (Eigen::Index d = 0; d < hd; ++d) dst[d] = b.out(i, d) * inverse;
    }
  }
}

}  // namespace kvplan
