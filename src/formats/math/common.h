// Shared by every codec family of src/formats/math/: little-endian loads and stores, min/max
// reductions and the rounding helpers, written as pure inline functions for host and device
// (KVPLAN_HD) so CPU and GPU compute the same codes.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include "formats/float_convert.h"
#include "formats/kv_blocks.h"
#include "formats/kvplan_hd.h"

namespace kvplan {

#if !defined(__HIPCC__) && !defined(__CUDACC__)
// Packed words are stored with memcpy of their low bytes, which is little-endian order only on
// little-endian machines (x86-64, ARM64 Linux, every GPU kvplan targets).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "kvplan's byte formats assume little-endian");
#endif

KVPLAN_HD inline uint16_t load_u16_le(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
KVPLAN_HD inline void store_u16_le(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
KVPLAN_HD inline uint32_t load_u32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
KVPLAN_HD inline void store_u32_le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

KVPLAN_HD inline float fmaxf_hd(float a, float b) {
  return a > b ? a : b;
}
KVPLAN_HD inline float fminf_hd(float a, float b) {
  return a < b ? a : b;
}

// Min/max reductions are exact, so their evaluation order does not change the result; an OpenMP
// SIMD reduction lets the host compiler vectorise them without -ffast-math (device code ignores
// it).
#if defined(__HIPCC__) || defined(__CUDACC__)
#define KVPLAN_OMP_SIMD(...)
#else
#define KVPLAN_PRAGMA(text) _Pragma(#text)
#define KVPLAN_OMP_SIMD(...) KVPLAN_PRAGMA(omp simd __VA_ARGS__)
#endif

KVPLAN_HD inline float absmax(const float* x, int n) {
  float m = 0.0f;
  KVPLAN_OMP_SIMD(reduction(max : m))
  for (int j = 0; j < n; ++j) m = fmaxf_hd(m, std::fabs(x[j]));
  return m;
}

// The first element equal to `value`: recovers the sign a sequential scan would keep when the
// extreme is +-0 (ggml's `if (v < min) min = v` keeps the first zero it meets).
KVPLAN_HD inline float first_equal(const float* x, int n, float value) {
  for (int j = 0; j < n; ++j) {
    if (x[j] == value) return x[j];
  }
  return value;
}

KVPLAN_HD inline void minmax(const float* x, int n, float* out_min, float* out_max) {
  float lo = x[0], hi = x[0];
  KVPLAN_OMP_SIMD(reduction(min : lo) reduction(max : hi))
  for (int j = 0; j < n; ++j) {
    lo = fminf_hd(lo, x[j]);
    hi = fmaxf_hd(hi, x[j]);
  }
  *out_min = lo == 0.0f ? first_equal(x, n, lo) : lo;
  *out_max = hi == 0.0f ? first_equal(x, n, hi) : hi;
}

// The value of largest magnitude, keeping its sign; the first one wins ties (ggml's rule). The
// vectorised min and max decide it unless +a and -a both occur, when a scan finds the first.
KVPLAN_HD inline float signed_absmax(const float* x, int n) {
  float lo, hi;
  minmax(x, n, &lo, &hi);
  if (hi > -lo) return hi;
  if (-lo > hi) return lo;
  if (hi == 0.0f) return 0.0f;  // all zeros: ggml keeps max = 0
  const float amax = hi;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) == amax) return x[j];
  }
  return 0.0f;  // only reachable with NaN input
}

// C's roundf (halves away from zero) to int for |v| < 2^31, written so that it vectorises:
// v - trunc(v) is exact, so comparing it with +-0.5 decides the rounding exactly as roundf does.
KVPLAN_HD inline int round_half_away_to_int(float v) {
  const int t = static_cast<int>(v);
  const float frac = v - static_cast<float>(t);
  return t + (frac >= 0.5f) - (frac <= -0.5f);
}

}  // namespace kvplan
