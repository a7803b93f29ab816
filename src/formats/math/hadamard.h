// The normalized Walsh-Hadamard transform rotated formats apply to a row or a span of it
// (q4_0_had, q4_0_had64, TurboQuant keys, vLLM's int4 rows).
#pragma once

#include "formats/math/common.h"

namespace kvplan {

// ---- Hadamard-rotated rows (q4_0_had, ...) --------------------------------------------------
// The normalized Walsh-Hadamard transform of n values (n a power of two), in place: log2(n)
// butterfly passes of (a + b, a - b), then a scale of 1/sqrt(n). It is orthonormal and its own
// inverse, so dequantization applies it again. One fixed order of operations on CPU and GPU.
KVPLAN_HD inline void hadamard_butterflies(float* x, int n) {
  for (int half = 1; half < n; half *= 2) {
    for (int start = 0; start < n; start += 2 * half) {
      for (int i = start; i < start + half; ++i) {
        const float a = x[i], b = x[i + half];
        x[i] = a + b;
        x[i + half] = a - b;
      }
    }
  }
}
KVPLAN_HD inline void hadamard_transform(float* x, int n) {
  hadamard_butterflies(x, n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

// hadamard_transform of each span of `span` values of a row of n values (n a multiple of span):
// a rotated-domain reader rotates its operands with it (formats/pack.h rotation_span).
KVPLAN_HD inline void hadamard_transform_spans(float* x, int n, int span) {
  for (int s = 0; s < n; s += span) hadamard_transform(x + s, span);
}

// hadamard_transform of kLanes rows at once, given interleaved (x[i * kLanes + l] is value i of
// row l, overwritten) and written out as rows (rows[l]). Every row goes through the operations of
// hadamard_transform in the same order, so each gives the same bits; one row per vector lane lets
// the narrow butterflies (half = 1, 2, 4), which cannot fill a register within one row, run kLanes
// wide. CPU only (the GPU gives a row a thread).
template <int kLanes>
inline void hadamard_transform_lanes(float* x, int n, float* const* rows) {
  for (int half = 1; half < n; half *= 2) {
    for (int start = 0; start < n; start += 2 * half) {
      for (int i = start; i < start + half; ++i) {
        float* a = x + i * kLanes;
        float* b = x + (i + half) * kLanes;
        KVPLAN_OMP_SIMD()
        for (int l = 0; l < kLanes; ++l) {
          const float p = a[l], q = b[l];
          a[l] = p + q;
          b[l] = p - q;
        }
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  KVPLAN_OMP_SIMD()
  for (int i = 0; i < n * kLanes; ++i) x[i] *= scale;
  for (int l = 0; l < kLanes; ++l) {
    for (int i = 0; i < n; ++i) rows[l][i] = x[i * kLanes + l];
  }
}

}  // namespace kvplan
