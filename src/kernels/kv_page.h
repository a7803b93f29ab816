// Views of one layer's paged, packed K (or V) cache and of the dense f16/bf16/f32 tensors the
// kernels read and write. Plain structs of dims, strides and pointers; their offset helpers serve
// the GPU kernels and the CPU reference paths (kv_reference.h) alike.
//
//   pages  [num_pages, page_size, n_kv_heads, row_bytes]   (bytes; row = one token, one KV head)
//   token t of sequence b lives in page page_table[b * page_table_stride + t / page_size],
//   slot t % page_size. A null page_table means page b*page_table_stride + t/page_size, i.e. the
//   sequences' pages are contiguous and in order.
//
//   kvplan::PagedKvView k{pages, table, /*page_size=*/16, /*n_kv_heads=*/8, f.row_bytes, 64};
//   const uint8_t* row = k.row(b, t, h);
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/float_convert.h"
#include "formats/kvplan_hd.h"

namespace kvplan {

struct PagedKvView {
  uint8_t* pages = nullptr;
  const int32_t* page_table = nullptr;  // [batch, page_table_stride] page ids, or null
  int64_t page_size = 0;                // tokens per page
  int n_kv_heads = 0;
  int64_t row_bytes = 0;          // packed bytes of one token's head_dim values for one head
  int64_t page_table_stride = 0;  // pages reserved per sequence (max pages per sequence)

  KVPLAN_HD int64_t page_bytes() const { return page_size * n_kv_heads * row_bytes; }
  KVPLAN_HD int64_t page_of(int64_t seq, int64_t token) const {
    const int64_t logical = token / page_size;
    return page_table ? static_cast<int64_t>(page_table[seq * page_table_stride + logical])
                      : seq * page_table_stride + logical;
  }
  // Byte offset of (sequence, token, head)'s packed row from `pages`.
  KVPLAN_HD int64_t row_offset(int64_t seq, int64_t token, int head) const {
    return page_of(seq, token) * page_bytes() +
           ((token % page_size) * n_kv_heads + head) * row_bytes;
  }
  KVPLAN_HD uint8_t* row(int64_t seq, int64_t token, int head) const {
    return pages + row_offset(seq, token, head);
  }
};

// Element type of a dense input or output tensor.
enum class DenseType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

// A dense [n_tokens, n_heads, head_dim] tensor: element (t, h, d) at
// t * token_stride + h * head_stride + d (strides in elements).
struct DenseKvView {
  void* data = nullptr;
  DenseType type = DenseType::kF32;
  int64_t n_tokens = 0;
  int n_heads = 0;
  int head_dim = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;

  KVPLAN_HD int64_t offset(int64_t token, int head, int d) const {
    return token * token_stride + head * head_stride + d;
  }
  // The value at (t, h, d) as f32; exact for every DenseType.
  KVPLAN_HD float load(int64_t token, int head, int d) const {
    const int64_t i = offset(token, head, d);
    switch (type) {
      case DenseType::kF16:
        return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
      case DenseType::kBF16:
        return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
      default:
        return static_cast<const float*>(data)[i];
    }
  }
};

KVPLAN_HD inline int dense_type_bytes(DenseType t) {
  return t == DenseType::kF32 ? 4 : 2;
}

// Contiguous [n_tokens, n_heads, head_dim].
inline DenseKvView dense_view(void* data, DenseType type, int64_t n_tokens, int n_heads,
                              int head_dim) {
  return {data,    type, n_tokens, n_heads, head_dim, static_cast<int64_t>(n_heads) * head_dim,
          head_dim};
}

}  // namespace kvplan
