// KIVI / KVTuner's asymmetric integers: groups of n values, scale = (max-min)/(2^b-1), zero = min,
// f16 scale and zero, codes bit-packed little-endian (lowest bits = first value).
#pragma once

#include "formats/math/common.h"

namespace kvplan {

// ---- uniform asymmetric integers (KIVI / KVTuner): scale = (max-min)/(2^b-1), zero = min -------
// Codes are computed against the f16-rounded scale and zero that dequantization will use, so the
// error of every value is at most half a step plus the f16 rounding of the zero point. The code is
// rint((x - zero) / scale) with a true division: multiplying by a rounded 1/scale picks the farther
// code for some values within an ulp of a half step (tests/formats/kv_golden_test.cpp has them).
KVPLAN_HD inline float saturate_to_f16_range(float v) {
  return fminf_hd(fmaxf_hd(v, -65504.0f), 65504.0f);
}

template <int kBits>
KVPLAN_HD inline uint32_t int_code(float x, float zero, float divisor) {
  const float q = std::rint((x - zero) / divisor);
  // Through int: float -> unsigned has no vector instruction before AVX-512.
  return static_cast<uint32_t>(
      static_cast<int>(fminf_hd(fmaxf_hd(q, 0.0f), static_cast<float>((1 << kBits) - 1))));
}

// Packs eight codes held one per byte of a little-endian u64 (each < 2^kBits) into the low kBits
// bytes, first code in the lowest bits — the int formats' bit order.
template <int kBits>
KVPLAN_HD inline uint64_t pack_codes_u64(uint64_t w) {
  if constexpr (kBits == 8) {
    return w;
  } else if constexpr (kBits == 4) {
    w = (w | (w >> 4)) & 0x00FF00FF00FF00FFull;
    w = (w | (w >> 8)) & 0x0000FFFF0000FFFFull;
    return (w | (w >> 16)) & 0xFFFFFFFFull;
  } else {
    static_assert(kBits == 2);
    w = (w | (w >> 6)) & 0x000F000F000F000Full;
    w = (w | (w >> 12)) & 0x000000FF000000FFull;
    return (w | (w >> 24)) & 0xFFFFull;
  }
}

template <int kBits>
KVPLAN_HD inline void quantize_group_int(const float* x, int n, uint8_t* out) {
  constexpr int kMaxCode = (1 << kBits) - 1;
  constexpr int kPerByte = 8 / kBits;
  float lo, hi;
  minmax(x, n, &lo, &hi);
  const uint16_t scale_h =
      f32_to_f16(saturate_to_f16_range((hi - lo) / static_cast<float>(kMaxCode)));
  const uint16_t zero_h = f32_to_f16(saturate_to_f16_range(lo));
  store_u16_le(out, scale_h);
  store_u16_le(out + 2, zero_h);
  const float scale = f16_to_f32(scale_h);
  const float zero = f16_to_f32(zero_h);
  // A scale that rounds to 0 in f16 stores code 0 everywhere: dividing by +inf gives +-0.
  const float divisor = scale > 0.0f ? scale : f32_from_bits(0x7f800000u);
  uint8_t* codes = out + sizeof(IntGroupHeader);
  // Codes go through a small buffer: computing them is the vectorisable part, bit-packing a
  // handful of bytes is not (and a 2-bit group of 32 fills only 8 bytes).
  constexpr int kChunk = 64;
  uint8_t chunk[kChunk];
  for (int base = 0; base < n; base += kChunk) {
    const int len = n - base < kChunk ? n - base : kChunk;
    for (int i = 0; i < len; ++i)
      chunk[i] = static_cast<uint8_t>(int_code<kBits>(x[base + i], zero, divisor));
    for (int i = len; i % kPerByte != 0; ++i) chunk[i] = 0;  // pad the last partial byte
    const int n_bytes = (len + kPerByte - 1) / kPerByte;
    int b = 0;
    // Eight codes at a time: fold the bytes of a little-endian u64 into kBits-wide fields.
    for (; (b + kBits) * kPerByte <= len; b += kBits) {
      uint64_t w;
      std::memcpy(&w, chunk + b * kPerByte, sizeof w);
      w = pack_codes_u64<kBits>(w);
      std::memcpy(codes + base / kPerByte + b, &w, kBits);  // little-endian: low bytes first
    }
    for (; b < n_bytes; ++b) {
      uint32_t byte = 0;
      for (int k = 0; k < kPerByte; ++k) {
        byte |= static_cast<uint32_t>(chunk[b * kPerByte + k]) << (k * kBits);
      }
      codes[base / kPerByte + b] = static_cast<uint8_t>(byte);
    }
  }
}

template <int kBits>
KVPLAN_HD inline void dequantize_group_int(const uint8_t* in, int n, float* y) {
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  constexpr int kPerByte = 8 / kBits;
  const float scale = f16_to_f32(load_u16_le(in));
  const float zero = f16_to_f32(load_u16_le(in + 2));
  const uint8_t* codes = in + sizeof(IntGroupHeader);
  const int whole_bytes = n / kPerByte;
  for (int b = 0; b < whole_bytes; ++b) {
    for (int k = 0; k < kPerByte; ++k) {
      y[b * kPerByte + k] = static_cast<float>((codes[b] >> (k * kBits)) & kMask) * scale + zero;
    }
  }
  for (int i = whole_bytes * kPerByte; i < n; ++i) {
    const uint32_t code = (codes[i / kPerByte] >> ((i % kPerByte) * kBits)) & kMask;
    y[i] = static_cast<float>(code) * scale + zero;
  }
}
// dequantize_group_int of kLanes groups of n values (in[l]), written transposed: value i of group
// l goes to y[i * y_stride + l] (per-channel keys: a group is one channel over n tokens, and
// attention wants tokens as rows). The same bits; CPU only.
template <int kBits, int kLanes>
inline void dequantize_groups_int_transposed(const uint8_t* const* in, int n, float* y,
                                             size_t y_stride) {
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  constexpr int kPerByte = 8 / kBits;
  float scale[kLanes], zero[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    scale[l] = f16_to_f32(load_u16_le(in[l]));
    zero[l] = f16_to_f32(load_u16_le(in[l] + 2));
  }
  for (int i = 0; i < n; ++i) {
    float* row = y + static_cast<size_t>(i) * y_stride;
    const int byte = static_cast<int>(sizeof(IntGroupHeader)) + i / kPerByte;
    const int shift = (i % kPerByte) * kBits;
    for (int l = 0; l < kLanes; ++l) {
      const uint32_t code = (in[l][byte] >> shift) & kMask;
      row[l] = static_cast<float>(code) * scale[l] + zero[l];
    }
  }
}

}  // namespace kvplan
