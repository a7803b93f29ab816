// Host launchers of kvplan's KV kernels (kernels/*.hip). Each takes a parameter struct of device
// pointers and views, and a stream; it validates the parameters, launches, and returns a Status
// (never throws). Plain C++: callers compile with the host compiler. kv_reference.h holds the CPU
// reference path of each kernel, built from the same headers.
//
//   kvplan::gpu::PackPageParams p;
//   p.src = kvplan::dense_view(d_keys, kvplan::DenseType::kF16, n_tokens, n_kv_heads, head_dim);
//   p.dst = {d_pages, d_table, 16, n_kv_heads, fmt.row_bytes, max_pages};
//   p.format = fmt;
//   kvplan::gpu::Status s = kvplan::gpu::pack_page(p, stream);
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gpu_runtime.h"
#include "kernels/kv_page.h"
#include "formats/kv_row_format.h"

namespace kvplan::gpu {

// Packs src [n_tokens, n_kv_heads, head_dim] (f32, f16 or bf16) into the rows of tokens
// [first_token, first_token + n_tokens) of sequence `seq` in dst. Codes are bit-identical to
// src/formats pack_rows on the same values converted to f32.
struct PackPageParams {
  DenseKvView src;
  PagedKvView dst;
  RowFormat format;
  int64_t seq = 0;
  int64_t first_token = 0;
  const float* fp8_scales = nullptr;  // [n_kv_heads] device; null = 1 (FP8 formats only)
};
Status pack_page(const PackPageParams& p, Stream stream);

// Unpacks tokens [first_token, first_token + n_tokens) of sequence `seq` into dst
// [n_tokens, n_kv_heads, head_dim] f32 (contiguous).
struct UnpackPageParams {
  PagedKvView src;
  RowFormat format;
  int64_t seq = 0;
  int64_t first_token = 0;
  int64_t n_tokens = 0;
  const float* fp8_scales = nullptr;
  float* dst = nullptr;
};
Status unpack_page(const UnpackPageParams& p, Stream stream);

// One decode step: for each sequence b and query head h,
//   out[b, h] = softmax(q[b, h] . K[b, :, g]^T * sm_scale) V[b, :, g],  g = h /
//   (n_heads/n_kv_heads)
// over the seq_lens[b] cached tokens, reading the packed pages directly. Tokens are split into
// n_splits chunks per (sequence, KV head) so long contexts fill the GPU (flash-decoding); each
// split keeps an online softmax (running max and sum) and a second pass merges the splits.
struct DecodeAttentionParams {
  const float* q = nullptr;  // [batch, n_heads, head_dim]
  PagedKvView k, v;          // page tables [batch, page_table_stride]
  RowFormat k_format, v_format;
  const float* k_fp8_scales = nullptr;  // [n_kv_heads] or null
  const float* v_fp8_scales = nullptr;
  const int32_t* seq_lens = nullptr;  // [batch] device; each in [1, max_seq_len]
  int batch = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int64_t max_seq_len = 0;
  float sm_scale = 0.0f;       // usually 1/sqrt(head_dim)
  int n_splits = 0;            // 0 = choose (decode_attention_default_splits)
  float* workspace = nullptr;  // decode_attention_workspace_bytes(...) bytes
  float* out = nullptr;        // [batch, n_heads, head_dim]
  float* lse = nullptr;        // optional [batch, n_heads]: log-sum-exp of the scaled scores
};
// Tokens dequantized into shared memory at a time; each split covers a multiple of it.
// decode_attention_default_splits / _split_tokens / _workspace_bytes: kv_params_check.h.
inline constexpr int kDecodeTile = 16;
Status decode_attention(const DecodeAttentionParams& p, Stream stream);

// The profiler's batched attention over captured queries (one sequence, causal, optional sliding
// window) with quantized K/V: the packed rows are unpacked into k_scratch/v_scratch (bit-identical
// to the CPU's unpack), then every query row's softmax probabilities and output are written.
// Query i sits at position pos0 + i and sees keys max(0, pos - window + 1) .. pos.
struct BatchedAttentionParams {
  const float* q = nullptr;  // [n_queries, n_heads, head_dim]
  PagedKvView k, v;          // sequence 0 of these views holds the n_keys cached tokens
  RowFormat k_format, v_format;
  const float* k_fp8_scales = nullptr;
  const float* v_fp8_scales = nullptr;
  int64_t n_queries = 0, n_keys = 0, pos0 = 0, window = 0;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float sm_scale = 0.0f;
  float* k_scratch = nullptr;  // [n_keys, n_kv_heads, head_dim]
  float* v_scratch = nullptr;
  float* scores = nullptr;  // [n_heads, n_queries, n_keys] probabilities, 0 where masked
  float* out = nullptr;     // [n_queries, n_heads, head_dim]
};
Status batched_attention(const BatchedAttentionParams& p, Stream stream);

}  // namespace kvplan::gpu

// check_*_params (shared by launchers and CPU reference paths) and the sizing helpers.
#include "kernels/kv_params_check.h"
