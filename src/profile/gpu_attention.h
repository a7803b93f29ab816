// The profiler's attention over quantized K/V on a GPU (`kvplan profile --device gpu`): captured
// f32 K and V are packed into the candidate formats by the pack_page kernel (codes bit-identical
// to src/formats), and the batched attention kernel returns every head's softmax probabilities
// and outputs. The profiler turns them into e_a and e_o exactly as it does on the CPU; the
// forward passes (captures, dKL) stay on the CPU. Per-token mode only: KIVI's per-channel keys
// are packed by the CPU path.
//
//   kvplan::GpuAttention gpu(0);
//   kvplan::GpuAttention::Result r = gpu.attend(q, k, v, kf, vf, settings, shape, head_dim);
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "formats/format.h"
#include "formats/fp8_scales.h"
#include "formats/quant_settings.h"
#include "profile/metrics.h"

namespace kvplan {

class GpuAttention {
 public:
  // Uses GPU `device`; throws Error naming the failing call when it cannot.
  explicit GpuAttention(int device);
  ~GpuAttention();
  GpuAttention(const GpuAttention&) = delete;
  GpuAttention& operator=(const GpuAttention&) = delete;

  // Whether the GPU path packs every candidate's K/V as `settings` asks: per-token rows, so no
  // candidate may run KIVI (layer_runs_kivi).
  static bool supports(const QuantSettings& settings, std::span<const KvPair> candidates);

  struct Result {
    std::vector<RowMatrix> probabilities;  // [n_heads] of [T, T], zeros outside the causal window
    RowMatrix out;                         // [T, n_heads * head_dim]
  };
  // q [T, n_heads * head_dim], k and v [T, n_kv_heads * head_dim] (exact, f32); `fp8_scales` the
  // layer's per-head FP8 scales (empty sides = 1). Thread-safe: calls from several threads take
  // turns on the device.
  Result attend(const RowMatrix& q, const RowMatrix& k, const RowMatrix& v, Format key_format,
                Format value_format, const QuantSettings& settings,
                const AttentionLayerShape& shape, const KvHeadScales& fp8_scales);

 private:
  struct Buffers;
  std::mutex mu_;
  int device_;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace kvplan
