// Small floats with a float scale per block: OCP MX (MXFP4, MXFP6 E2M3, MXFP8 E4M3; E8M0 scale per
// 32) and NVFP4 (E2M1 codes, E4M3 scale per 16, over an f32 scale per (layer, head)).
#pragma once

#include "formats/math/common.h"

namespace kvplan {

// ---- OCP MX: blocks of 32 with an E8M0 shared scale (kv_blocks.h) ------------------------------
// ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128), half of the E8M0 value, because ggml's MXFP4 codebook
// holds the E2M1 values doubled.
KVPLAN_HD inline float e8m0_half_to_f32(uint8_t e) {
  return pow2f_wide(static_cast<int>(e) - 128);
}

// ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (0 for an all-zero block), and
// each code is the first of the 16 codebook entries k*d (d = 2^(e - 128), k = 2 * E2M1) nearest to
// x, which sends ties to the smaller magnitude and zero to +0. ggml takes floor(log2f(amax));
// kvplan takes the exact floor (floor_log2), which differs only for amax within 2^-24 relative
// below a power of two, where log2f rounds up. e is clamped to a byte (amax < 2^-125 gives 0).
KVPLAN_HD inline void quantize_block_mxfp4(const float* x, uint8_t* out) {
  const float amax = absmax(x, kMxBlock);
  int e = amax > 0.0f ? floor_log2(amax) - 2 + 127 : 0;
  e = e < 0 ? 0 : (e > 254 ? 254 : e);
  const float d = e8m0_half_to_f32(static_cast<uint8_t>(e));
  uint8_t q[kMxBlock];
  for (int j = 0; j < kMxBlock; ++j) {
    int best = 0;
    float best_err = std::fabs(0.0f * d - x[j]);
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(2.0f * fp4_e2m1_to_f32(static_cast<uint8_t>(i)) * d - x[j]);
      if (err < best_err) {
        best = i;
        best_err = err;
      }
    }
    q[j] = static_cast<uint8_t>(best);
  }
  out[0] = static_cast<uint8_t>(e);
  for (int j = 0; j < kMxBlock / 2; ++j) {
    out[1 + j] = static_cast<uint8_t>(q[j] | (q[j + kMxBlock / 2] << 4));
  }
}
KVPLAN_HD inline void dequantize_block_mxfp4(const uint8_t* in, float* y) {
  const float d = e8m0_half_to_f32(in[0]);
  for (int j = 0; j < kMxBlock / 2; ++j) {
    y[j] = 2.0f * fp4_e2m1_to_f32(in[1 + j] & 0x0f) * d;
    y[j + kMxBlock / 2] = 2.0f * fp4_e2m1_to_f32(in[1 + j] >> 4) * d;
  }
}

// OCP's shared exponent (Microsoft's microxcaling reference): floor(log2(amax)) minus the element
// type's largest exponent, clamped to E8M0's [-127, 127]; an all-zero block takes FP32's smallest
// normal as its amax. Elements are x / 2^shared converted with round-to-nearest-even, saturating.
template <int kElementEmax>
KVPLAN_HD inline int mx_shared_exponent(float amax) {
  const int shared = (amax > 0.0f ? floor_log2(amax) : -126) - kElementEmax;
  return shared < -127 ? -127 : (shared > 127 ? 127 : shared);
}

// MXFP8 E4M3 (element emax 8, max 448): one code per byte.
KVPLAN_HD inline void quantize_block_mxfp8_e4m3(const float* x, uint8_t* out) {
  const int shared = mx_shared_exponent<8>(absmax(x, kMxBlock));
  const float inv = pow2f_wide(-shared);
  out[0] = static_cast<uint8_t>(shared + 127);
  for (int j = 0; j < kMxBlock; ++j) out[1 + j] = f32_to_fp8_e4m3(x[j] * inv);
}
KVPLAN_HD inline void dequantize_block_mxfp8_e4m3(const uint8_t* in, float* y) {
  const float scale = pow2f_wide(static_cast<int>(in[0]) - 127);
  for (int j = 0; j < kMxBlock; ++j) y[j] = fp8_e4m3_to_f32(in[1 + j]) * scale;
}

// MXFP6 E2M3 (element emax 2, max 7.5): four 6-bit codes in three bytes, little-endian.
KVPLAN_HD inline void quantize_block_mxfp6_e2m3(const float* x, uint8_t* out) {
  const int shared = mx_shared_exponent<2>(absmax(x, kMxBlock));
  const float inv = pow2f_wide(-shared);
  out[0] = static_cast<uint8_t>(shared + 127);
  for (int j = 0; j < kMxBlock; j += 4) {
    uint32_t word = 0;
    for (int k = 0; k < 4; ++k) {
      word |= static_cast<uint32_t>(f32_to_fp6_e2m3(x[j + k] * inv)) << (6 * k);
    }
    uint8_t* dst = out + 1 + j / 4 * 3;
    dst[0] = static_cast<uint8_t>(word);
    dst[1] = static_cast<uint8_t>(word >> 8);
    dst[2] = static_cast<uint8_t>(word >> 16);
  }
}
KVPLAN_HD inline void dequantize_block_mxfp6_e2m3(const uint8_t* in, float* y) {
  const float scale = pow2f_wide(static_cast<int>(in[0]) - 127);
  for (int j = 0; j < kMxBlock; j += 4) {
    const uint8_t* src = in + 1 + j / 4 * 3;
    const uint32_t word = static_cast<uint32_t>(src[0]) | (static_cast<uint32_t>(src[1]) << 8) |
                          (static_cast<uint32_t>(src[2]) << 16);
    for (int k = 0; k < 4; ++k) {
      y[j + k] = fp6_e2m3_to_f32(static_cast<uint8_t>((word >> (6 * k)) & 0x3fu)) * scale;
    }
  }
}

// ---- NVFP4: 16 E2M1 codes with an E4M3 scale, over an f32 scale per (layer, head) ------------
// vLLM's store (nvfp4_kv_cache_kernels.cu, cvt_warp_fp16_to_fp4) with global = 1 / tensor_scale:
// sf = e4m3(global * (amax * (1/6))), codes = E2M1(x * 1 / (sf * (1 / global))), 0 when sf is 0.
// vLLM computes the three reciprocals with rcp.approx.ftz; kvplan divides exactly, so a value whose
// product lands within an approximate reciprocal's error of a rounding boundary can take the
// neighbouring code there. Element 2i goes to the low nibble of byte i.
KVPLAN_HD inline void quantize_group_nvfp4(const float* x, float tensor_scale, uint8_t* codes,
                                           uint8_t* scale) {
  const float global = 1.0f / tensor_scale;
  const float amax = absmax(x, kNvfp4Group);
  const uint8_t sf = f32_to_fp8_e4m3(global * (amax * (1.0f / 6.0f)));
  const float sf_value = fp8_e4m3_to_f32(sf);
  const float out_scale = sf_value != 0.0f ? 1.0f / (sf_value * (1.0f / global)) : 0.0f;
  for (int i = 0; i < kNvfp4Group / 2; ++i) {
    codes[i] = static_cast<uint8_t>(f32_to_fp4_e2m1(x[2 * i] * out_scale) |
                                    (f32_to_fp4_e2m1(x[2 * i + 1] * out_scale) << 4));
  }
  *scale = sf;
}
KVPLAN_HD inline void dequantize_group_nvfp4(const uint8_t* codes, uint8_t scale,
                                             float tensor_scale, float* y) {
  const float sf = fp8_e4m3_to_f32(scale);
  for (int i = 0; i < kNvfp4Group / 2; ++i) {
    y[2 * i] = fp4_e2m1_to_f32(codes[i] & 0x0f) * sf * tensor_scale;
    y[2 * i + 1] = fp4_e2m1_to_f32(codes[i] >> 4) * sf * tensor_scale;
  }
}

}  // namespace kvplan
