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
// A decode step has one query block per KV head: too few tasks for the cores (SmolLM2 has 3 KV
// heads, Gemma 3 one). Its keys are split into spans of kDecodeSplit positions (aligned, whole
// tiles) folded by separate tasks and merged in span order, flash-decoding style. The split
// depends on the position only, never on the thread count, so bits do not either; a context
// within one span takes exactly the unsplit path.
constexpr Eigen::Index kDecodeSplit = 512;
static_assert(kDecodeSplit % static_cast<Eigen::Index>(kKeyTile) == 0);
// Below this many multiply-adds a parallel region costs more than it saves.
constexpr double kParallelMultiplyAdds = 1e6;
constexpr double kParallelMultiplyAddsDecode = 2.5e5;  // one query: tasks are dequant-bound

// One thread's buffers, kept between calls (grown, never shrunk).
struct TileBuffers {
  Mat queries, keys, values, scores, out;
  std::vector<float> max, sum, scratch;
};

TileBuffers& thread_buffers() {
  thread_local TileBuffers buffers;
  return buffers;
}

// A span's running softmax, unnormalized: per row, its max score, the sum of exp(s - max) and the
// weighted sum of values (still rotated where the values are read rotated).
struct PartialSoftmax {
  Mat out;
  std::vector<float> max, sum;
};

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
  // A decode step's visible keys [decode_first, p0] in spans of kDecodeSplit.
  const bool decode = n == 1;
  const Eigen::Index decode_first = decode ? first_key(p0) : 0;
  const Eigen::Index splits = decode ? p0 / kDecodeSplit - decode_first / kDecodeSplit + 1 : 1;
  const Eigen::Index tasks = blocks * shape.n_kv_heads * splits;
  // Threads only pay off above a few hundred thousand multiply-adds (tiny models, short decodes).
  const bool parallel = static_cast<double>(T) * static_cast<double>(n_keys) *
                            static_cast<double>(hd) * shape.n_heads >
                        (decode ? kParallelMultiplyAddsDecode : kParallelMultiplyAdds);
  // A decode step (one query position) reads rotated formats in their rotated domain
  // (formats/kv_row_format.h kHasRotatedDomain): its few query rows are rotated once, and their
  // weighted sums of values rotated back once, instead of every cached key and value row it reads
  // (decode tokens/s of SmolLM2's plan-6480 at 4K context: 0.84x -> 0.90x of bf16). A prefill
  // block shares each row's unrotation among its 64 x group query rows, so prefill keeps the
  // row-domain reads, and with them the bits eval, profile and search measure.
  const bool rotated_domain = decode;
  // Per KV head: a per-head layer's heads may take formats of different rotations.
  const auto span_of = [&](KvSide side, int g) {
    return rotated_domain ? cache.rotation_span(side, g) : 0;
  };
  // Split decode spans' partial results, [kv head * splits + span]; merged after the tasks.
  std::vector<PartialSoftmax> partials(splits > 1 ? static_cast<size_t>(tasks) : 0);

  // Writes rows [b0, b0 + rows) of KV head g: the weighted value sums `sums` (rotated back where
  // read rotated) divided by their softmax sums.
  const auto write_rows = [&](int g, Eigen::Index b0, Eigen::Index rows, Mat& sums,
                              const std::vector<float>& softmax_sums) {
    const int value_span = span_of(KvSide::kValue, g);
    for (Eigen::Index i = 0; i < rows * group; ++i) {
      const int h = g * group + static_cast<int>(i / rows);
      float* dst = out + static_cast<size_t>(b0 + i % rows) * out_stride +
                   static_cast<size_t>(h) * static_cast<size_t>(hd);
      if (value_span > 0) hadamard_transform_spans(sums.row(i).data(), shape.head_dim, value_span);
      const float inverse = 1.0f / softmax_sums[static_cast<size_t>(i)];
      for (Eigen::Index d = 0; d < hd; ++d) dst[d] = sums(i, d) * inverse;
    }
  };

  const SerialEigenScope serial;  // parallel over tasks, or too small to split
#pragma omp parallel for schedule(dynamic) if (parallel && tasks > 1)
  for (Eigen::Index task = 0; task < tasks; ++task) {
    const int g = static_cast<int>(task / (blocks * splits));
    const Eigen::Index b0 = (task / splits % blocks) * kQueryBlock;
    const Eigen::Index split = task % splits;
    const Eigen::Index rows = std::min(kQueryBlock, T - b0);
    const Eigen::Index R =
        rows * group;  // row i: query head g * group + i / rows, position i % rows
    TileBuffers& b = thread_buffers();
    const int key_span = span_of(KvSide::kKey, g);
    const int value_span = span_of(KvSide::kValue, g);
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
    // Keys visible to any row of the block: [k0, k1]; a decode span's part of them.
    Eigen::Index k0 = first_key(p0 + b0);
    Eigen::Index k1 = p0 + b0 + rows - 1;
    if (splits > 1) {
      const Eigen::Index span0 = (decode_first / kDecodeSplit + split) * kDecodeSplit;
      k0 = std::max(k0, span0);
      k1 = std::min(k1, span0 + kDecodeSplit - 1);
    }
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
    if (splits > 1) {
      PartialSoftmax& p = partials[static_cast<size_t>(task)];
      p.out = b.out;
      p.max = b.max;
      p.sum = b.sum;
    } else {
      write_rows(g, b0, rows, b.out, b.sum);
    }
  }
  if (splits == 1) return;
  // Each KV head's spans, merged in span order: rescaled to the largest max of the row.
  for (int g = 0; g < shape.n_kv_heads; ++g) {
    PartialSoftmax& merged = partials[static_cast<size_t>(g) * static_cast<size_t>(splits)];
    for (Eigen::Index split = 1; split < splits; ++split) {
      const PartialSoftmax& p = partials[static_cast<size_t>(g) * static_cast<size_t>(splits) +
                                         static_cast<size_t>(split)];
      for (Eigen::Index i = 0; i < merged.out.rows(); ++i) {
        float& max = merged.max[static_cast<size_t>(i)];
        const float new_max = std::max(max, p.max[static_cast<size_t>(i)]);
        const float keep = std::exp(max - new_max);
        const float add = std::exp(p.max[static_cast<size_t>(i)] - new_max);
        merged.sum[static_cast<size_t>(i)] =
            merged.sum[static_cast<size_t>(i)] * keep + p.sum[static_cast<size_t>(i)] * add;
        merged.out.row(i) = merged.out.row(i) * keep + p.out.row(i) * add;
        max = new_max;
      }
    }
    write_rows(g, 0, 1, merged.out, merged.sum);
  }
}

}  // namespace kvplan
