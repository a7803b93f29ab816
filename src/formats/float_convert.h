// Bit-exact conversions between f32 and the narrow float types kvplan stores: IEEE f16, bf16 and
// OCP FP8 (E4M3 "fn" and E5M2). Pure inline functions shared by CPU and GPU code, so both produce
// identical bits. Rounding is round-to-nearest-even everywhere (what F16C, ggml and CUDA use).
//
//   uint16_t h = kvplan::f32_to_f16(x);  float y = kvplan::f16_to_f32(h);
#pragma once

#include <cstdint>
#include <cstring>

#include "formats/kvplan_hd.h"

#if defined(__F16C__) && !defined(__HIPCC__) && !defined(__CUDACC__)
#include <immintrin.h>
#define KVPLAN_HAVE_F16C 1
#endif

namespace kvplan {

KVPLAN_HD inline uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

KVPLAN_HD inline float f32_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// 2^k for k in [-126, 127], exact.
KVPLAN_HD inline float pow2f(int k) {
  return f32_from_bits(static_cast<uint32_t>(k + 127) << 23);
}

// 2^k for k in [-149, 127], exact (subnormal below -126).
KVPLAN_HD inline float pow2f_wide(int k) {
  return k >= -126 ? pow2f(k) : f32_from_bits(1u << (k + 149));
}

// floor(log2(a)) of a finite a > 0, exact: read from the float's exponent (subnormals included),
// where log2f could round a value just below a power of two up to it.
KVPLAN_HD inline int floor_log2(float a) {
  const uint32_t u = f32_bits(a) & 0x7fffffffu;
  const int exp_field = static_cast<int>(u >> 23);
  if (exp_field > 0) return exp_field - 127;
  int top = 22;
  while (top > 0 && (u >> top) == 0) --top;
  return top - 149;
}

// Portable conversions (device code, and the reference the F16C path is tested against).
KVPLAN_HD inline float f16_to_f32_soft(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in f32.
    const float v = static_cast<float>(man) * pow2f(-24);
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

KVPLAN_HD inline uint16_t f32_to_f16_soft(float x) {
  const uint32_t u = f32_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN -> quiet NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {
    // Result is an f16 subnormal (or zero): quantum 2^-24. a * 2^24 then round-to-nearest-even.
    const float scaled = f32_from_bits(a) * pow2f(24);
    const uint32_t whole = static_cast<uint32_t>(scaled);
    const float frac = scaled - static_cast<float>(whole);
    uint32_t m = whole;
    if (frac > 0.5f || (frac == 0.5f && (whole & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);  // m == 0x400 becomes the smallest normal, as it must
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even; a carry into the exponent is correct.
  const uint32_t rebased = a - (112u << 23);
  const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

// F16C hardware conversion where the host has it: it rounds to nearest even exactly as the soft
// code (tested bit for bit); only NaN payloads differ, so NaN takes the soft path.
KVPLAN_HD inline float f16_to_f32(uint16_t h) {
#if defined(KVPLAN_HAVE_F16C)
  return _cvtsh_ss(h);
#else
  return f16_to_f32_soft(h);
#endif
}

KVPLAN_HD inline uint16_t f32_to_f16(float x) {
#if defined(KVPLAN_HAVE_F16C)
  if (x == x) return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
#endif
  return f32_to_f16_soft(x);
}

KVPLAN_HD inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

KVPLAN_HD inline uint16_t f32_to_bf16(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// OCP 8-bit floats. E4M3 ("fn"): bias 7, no infinities, 0x7f/0xff are NaN, max finite 448.
// E5M2: bias 15, IEEE-like with inf (0x7c) and NaN, max finite 57344. Conversions saturate
// finite values to the largest finite magnitude (what KV-cache FP8 kernels do) and map NaN to NaN.
template <int kExpBits, int kManBits, int kBias, uint8_t kMaxFiniteCode, uint8_t kNanCode>
KVPLAN_HD inline uint8_t f32_to_fp8(float x) {
  const uint32_t u = f32_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | kNanCode);
  const int exp32 = static_cast<int>(a >> 23);
  if (exp32 == 0) return sign;  // f32 zero/subnormal: far below the smallest fp8 subnormal
  const int e = exp32 - 127;
  const int max_exp_field = kMaxFiniteCode >> kManBits;
  if (e + kBias > max_exp_field) return static_cast<uint8_t>(sign | kMaxFiniteCode);
  const bool subnormal = e < 1 - kBias;
  // Quantum (value of one mantissa step) at this magnitude; dividing by a power of two is exact.
  const int quantum_exp = subnormal ? 1 - kBias - kManBits : e - kManBits;
  if (quantum_exp < -126) return sign;
  const float steps = f32_from_bits(a) * pow2f(-quantum_exp);
  const uint32_t whole = static_cast<uint32_t>(steps);
  const float frac = steps - static_cast<float>(whole);
  uint32_t r = whole;
  if (frac > 0.5f || (frac == 0.5f && (whole & 1u))) ++r;
  uint32_t code;
  if (subnormal) {
    code = r;  // r == 2^kManBits lands exactly on the smallest normal's code
  } else {
    int exp_field = e + kBias;
    if (r == (2u << kManBits)) {
      ++exp_field;
      r = 1u << kManBits;
    }
    code = (static_cast<uint32_t>(exp_field) << kManBits) | (r - (1u << kManBits));
  }
  if (code > kMaxFiniteCode) code = kMaxFiniteCode;
  return static_cast<uint8_t>(sign | code);
}

template <int kExpBits, int kManBits, int kBias, bool kHasInf>
KVPLAN_HD inline float fp8_to_f32(uint8_t v) {
  const bool negative = (v & 0x80u) != 0;
  const uint32_t exp_field = (v >> kManBits) & ((1u << kExpBits) - 1u);
  const uint32_t man = v & ((1u << kManBits) - 1u);
  float magnitude;
  if (kHasInf && exp_field == (1u << kExpBits) - 1u) {
    magnitude = man == 0 ? f32_from_bits(0x7f800000u) : f32_from_bits(0x7fc00000u);
  } else if (!kHasInf && exp_field == (1u << kExpBits) - 1u && man == (1u << kManBits) - 1u) {
    magnitude = f32_from_bits(0x7fc00000u);
  } else if (exp_field == 0) {
    magnitude = static_cast<float>(man) * pow2f(1 - kBias - kManBits);
  } else {
    magnitude = static_cast<float>((1u << kManBits) | man) *
                pow2f(static_cast<int>(exp_field) - kBias - kManBits);
  }
  return negative ? -magnitude : magnitude;
}

KVPLAN_HD inline uint8_t f32_to_fp8_e4m3(float x) {
  return f32_to_fp8<4, 3, 7, 0x7e, 0x7f>(x);
}
KVPLAN_HD inline uint8_t f32_to_fp8_e5m2(float x) {
  return f32_to_fp8<5, 2, 15, 0x7b, 0x7f>(x);
}
KVPLAN_HD inline float fp8_e4m3_to_f32(uint8_t v) {
  return fp8_to_f32<4, 3, 7, false>(v);
}
KVPLAN_HD inline float fp8_e5m2_to_f32(uint8_t v) {
  return fp8_to_f32<5, 2, 15, true>(v);
}

// OCP FP4 E2M1 and FP6 E2M3, the MX element types (E2M1 is also NVFP4's): two exponent bits,
// bias 1, no infinities or NaN. Conversions round to nearest even and saturate to the largest
// magnitude (6 and 7.5), NaN included. The sign is the top bit of the 4- or 6-bit code.
KVPLAN_HD inline uint8_t f32_to_fp4_e2m1(float x) {
  const uint8_t c = f32_to_fp8<2, 1, 1, 0x07, 0x07>(x);
  return static_cast<uint8_t>((c & 0x07u) | ((c >> 4) & 0x08u));
}
KVPLAN_HD inline uint8_t f32_to_fp6_e2m3(float x) {
  const uint8_t c = f32_to_fp8<2, 3, 1, 0x1f, 0x1f>(x);
  return static_cast<uint8_t>((c & 0x1fu) | ((c >> 2) & 0x20u));
}
template <int kManBits>
KVPLAN_HD inline float e2_minifloat_to_f32(uint8_t v) {
  const uint32_t exp_field = (v >> kManBits) & 3u;
  const uint32_t man = v & ((1u << kManBits) - 1u);
  const float magnitude = exp_field == 0 ? static_cast<float>(man) * pow2f(-kManBits)
                                         : static_cast<float>((1u << kManBits) | man) *
                                               pow2f(static_cast<int>(exp_field) - 1 - kManBits);
  return (v >> (2 + kManBits)) & 1u ? -magnitude : magnitude;
}
KVPLAN_HD inline float fp4_e2m1_to_f32(uint8_t v) {
  return e2_minifloat_to_f32<1>(v);
}
KVPLAN_HD inline float fp6_e2m3_to_f32(uint8_t v) {
  return e2_minifloat_to_f32<3>(v);
}

inline constexpr float kFp8E4m3Max = 448.0f;
inline constexpr float kFp8E5m2Max = 57344.0f;

}  // namespace kvplan
