// Parameter checks and sizing helpers of the KV kernels (declared in kv_kernels.h), inline so the
// GPU launchers, the CPU reference paths and CPU-only builds share them. Supported values are
// listed here, in one place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kv_kernels.h"

namespace kvplan::gpu {

// Attention kernels keep a KV head's query group and the head dim in one block: group * head_dim
// values of accumulator spread over kAttentionThreads threads, at most kMaxAccPerThread each.
inline constexpr int kAttentionThreads = 128;
inline constexpr int kMaxAccPerThread = 16;
inline constexpr int kMaxGroupTimesHeadDim = kAttentionThreads * kMaxAccPerThread;  // 2048

inline Status invalid(const char* message, const char* call) {
  return {StatusCode::kInvalidArgument, 0, message, call};
}
inline Status unimplemented(const char* message, const char* call) {
  return {StatusCode::kUnimplemented, 0, message, call};
}

inline Status check_row_format(const RowFormat& f, int head_dim, const char* call) {
  if (f.n_units <= 0 || f.row_bytes <= 0)
    return invalid("format: not initialised (use make_row_format)", call);
  if (f.row_values != head_dim) return invalid("format: row_values differs from head_dim", call);
  return ok_status();
}

inline Status check_paged_view(const PagedKvView& v, const RowFormat& f, int n_kv_heads,
                               const char* call) {
  if (v.pages == nullptr) return invalid("pages: null", call);
  if (v.page_size <= 0) return invalid("page_size: must be > 0", call);
  if (v.n_kv_heads != n_kv_heads) return invalid("pages: n_kv_heads differs", call);
  if (v.row_bytes != f.row_bytes)
    return invalid("pages: row_bytes differs from the format's", call);
  if (v.page_table_stride <= 0) return invalid("page_table_stride: must be > 0", call);
  return ok_status();
}

inline Status check_pack_params(const PackPageParams& p) {
  constexpr const char* call = "pack_page";
  if (p.src.data == nullptr) return invalid("src: null", call);
  if (p.src.n_tokens < 0 || p.src.n_heads <= 0) return invalid("src: bad dims", call);
  if (Status s = check_row_format(p.format, p.src.head_dim, call); !s.ok()) return s;
  if (Status s = check_paged_view(p.dst, p.format, p.src.n_heads, call); !s.ok()) return s;
  if (p.seq < 0 || p.first_token < 0) return invalid("seq/first_token: must be >= 0", call);
  if (p.first_token + p.src.n_tokens > p.dst.page_size * p.dst.page_table_stride)
    return invalid("first_token + n_tokens: past the sequence's pages", call);
  return ok_status();
}

inline Status check_unpack_params(const UnpackPageParams& p) {
  constexpr const char* call = "unpack_page";
  if (p.dst == nullptr) return invalid("dst: null", call);
  if (p.n_tokens < 0) return invalid("n_tokens: must be >= 0", call);
  if (Status s = check_row_format(p.format, p.format.row_values, call); !s.ok()) return s;
  if (Status s = check_paged_view(p.src, p.format, p.src.n_kv_heads, call); !s.ok()) return s;
  if (p.src.n_kv_heads <= 0) return invalid("src: n_kv_heads must be > 0", call);
  if (p.seq < 0 || p.first_token < 0) return invalid("seq/first_token: must be >= 0", call);
  if (p.first_token + p.n_tokens > p.src.page_size * p.src.page_table_stride)
    return invalid("first_token + n_tokens: past the sequence's pages", call);
  return ok_status();
}

inline Status check_attention_shape(int n_heads, int n_kv_heads, int head_dim, const char* call) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0)
    return invalid("n_heads, n_kv_heads, head_dim: must be > 0", call);
  if (n_heads % n_kv_heads != 0) return invalid("n_heads: not a multiple of n_kv_heads", call);
  if (head_dim > kMaxRowValues) return unimplemented("head_dim: supported up to 512", call);
  if ((n_heads / n_kv_heads) * head_dim > kMaxGroupTimesHeadDim)
    return unimplemented(
        "(n_heads / n_kv_heads) * head_dim: supported up to 2048 (e.g. group 8 x head_dim 256, "
        "group 16 x 128)",
        call);
  return ok_status();
}

inline int decode_attention_default_splits(int batch, int n_kv_heads, int64_t max_seq_len) {
  // Enough blocks to fill a large GPU (~4 per CU/SM on 132-304 of them), each split >= 256 tokens.
  const int64_t blocks_wanted = 1024;
  const int64_t base = static_cast<int64_t>(batch) * n_kv_heads;
  int64_t splits = base > 0 ? (blocks_wanted + base - 1) / base : 1;
  const int64_t by_length = (max_seq_len + 255) / 256;
  if (splits > by_length) splits = by_length;
  return splits < 1 ? 1 : static_cast<int>(splits);
}

inline int64_t decode_attention_split_tokens(int64_t max_seq_len, int n_splits) {
  const int64_t per = (max_seq_len + n_splits - 1) / n_splits;
  return (per + kDecodeTile - 1) / kDecodeTile * kDecodeTile;
}

// Workspace: unnormalised partial outputs [batch, n_heads, n_splits, head_dim], then (max, sum)
// pairs [batch, n_heads, n_splits, 2].
inline size_t decode_attention_workspace_bytes(int batch, int n_heads, int head_dim, int n_splits) {
  const size_t rows = static_cast<size_t>(batch) * n_heads * n_splits;
  return rows * (static_cast<size_t>(head_dim) + 2) * sizeof(float);
}

inline Status check_decode_params(const DecodeAttentionParams& p) {
  constexpr const char* call = "decode_attention";
  if (Status s = check_attention_shape(p.n_heads, p.n_kv_heads, p.head_dim, call); !s.ok())
    return s;
  if (p.head_dim > 256)
    return unimplemented("head_dim: decode supports up to 256 (shared-memory tile)", call);
  if (p.batch <= 0 || p.max_seq_len <= 0) return invalid("batch, max_seq_len: must be > 0", call);
  if (p.q == nullptr || p.out == nullptr || p.seq_lens == nullptr || p.workspace == nullptr)
    return invalid("q, out, seq_lens, workspace: must not be null", call);
  if (p.n_splits < 0) return invalid("n_splits: must be >= 0", call);
  if (!(p.sm_scale > 0.0f)) return invalid("sm_scale: must be > 0", call);
  if (Status s = check_row_format(p.k_format, p.head_dim, call); !s.ok()) return s;
  if (Status s = check_row_format(p.v_format, p.head_dim, call); !s.ok()) return s;
  if (Status s = check_paged_view(p.k, p.k_format, p.n_kv_heads, call); !s.ok()) return s;
  if (Status s = check_paged_view(p.v, p.v_format, p.n_kv_heads, call); !s.ok()) return s;
  if (p.max_seq_len > p.k.page_size * p.k.page_table_stride ||
      p.max_seq_len > p.v.page_size * p.v.page_table_stride)
    return invalid("max_seq_len: past the sequences' pages", call);
  return ok_status();
}

inline Status check_batched_params(const BatchedAttentionParams& p) {
  constexpr const char* call = "batched_attention";
  if (Status s = check_attention_shape(p.n_heads, p.n_kv_heads, p.head_dim, call); !s.ok())
    return s;
  if (p.n_queries <= 0 || p.n_keys <= 0) return invalid("n_queries, n_keys: must be > 0", call);
  if (p.pos0 < 0 || p.pos0 + p.n_queries > p.n_keys)
    return invalid("pos0 + n_queries: must be <= n_keys (queries are the last positions)", call);
  if (p.window < 0) return invalid("window: must be >= 0", call);
  if (p.q == nullptr || p.out == nullptr || p.scores == nullptr || p.k_scratch == nullptr ||
      p.v_scratch == nullptr)
    return invalid("q, out, scores, k_scratch, v_scratch: must not be null", call);
  if (!(p.sm_scale > 0.0f)) return invalid("sm_scale: must be > 0", call);
  if (Status s = check_row_format(p.k_format, p.head_dim, call); !s.ok()) return s;
  if (Status s = check_row_format(p.v_format, p.head_dim, call); !s.ok()) return s;
  if (Status s = check_paged_view(p.k, p.k_format, p.n_kv_heads, call); !s.ok()) return s;
  if (Status s = check_paged_view(p.v, p.v_format, p.n_kv_heads, call); !s.ok()) return s;
  if (p.n_keys > p.k.page_size * p.k.page_table_stride ||
      p.n_keys > p.v.page_size * p.v.page_table_stride)
    return invalid("n_keys: past the sequence's pages", call);
  return ok_status();
}

}  // namespace kvplan::gpu
