// Dequantization of GGUF tensor bytes to f32 (whole tensors at load, rows of weight tiles inside
// the products).
//
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (the block math of
// src/formats/kv_format_math.h, byte-identical to ggml's layouts) and the K-quants Q4_K, Q5_K, Q6_K
// (layouts in kquant_blocks.h).
//
//   std::vector<float> w = kvplan::dequantize_gguf_tensor(gguf,
//   gguf.tensor("blk.0.attn_q.weight"));
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "model/ggml_type.h"

namespace kvplan {

class GgufFile;
struct GgufTensorInfo;

// One super-block (256 values) of each K-quant.
void dequantize_block_q4_k(const uint8_t* block, float* out);
void dequantize_block_q5_k(const uint8_t* block, float* out);
void dequantize_block_q6_k(const uint8_t* block, float* out);

// True if dequantize_tensor handles `type`.
bool can_dequantize(GgmlType type);

// Dequantizes `n_values` values of `type` from `bytes` into `out` (n_values floats). `what` names
// the file and tensor for errors: Error(kUnimplemented) for an unsupported type, kInvalidArgument
// when n_values is not a whole number of blocks, kOutOfRange when `bytes` is too short.
void dequantize_tensor(GgmlType type, std::span<const std::byte> bytes, size_t n_values, float* out,
                       std::string_view what);

// `n_values` values of `type` from `src` into `out`, serially, without checks: the caller has
// checked the type (can_dequantize), that n_values is a whole number of blocks and the length.
void dequantize_row(GgmlType type, const std::byte* src, size_t n_values, float* out);

// The whole tensor as f32, in GGUF order (dims[0] contiguous).
std::vector<float> dequantize_gguf_tensor(const GgufFile& gguf, const GgufTensorInfo& info);

}  // namespace kvplan
