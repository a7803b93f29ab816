// PlanLayout: how a precision plan's KV pages are laid out in bytes, and how layers are grouped for
// transfers. A layer's pages are formats/kv_page_layout.h's (the harness's cache holds the same
// bytes): block_size tokens of all its KV heads, keys and values apart.
// A chunk (chunk_tokens, a multiple of block_size) is the unit the runtime caches. Its device image
// places transfer groups back to back, so each group moves with one copy:
//   chunk  : [group 0 region][group 1 region]...
//   group  : [layers of the group, in order][pages of the chunk][K page][V page]
// Layers share a transfer group when their geometry (KV heads, head_dim) and (K, V) formats are
// identical — e.g. MiniMax-M2.5's bf16 edge layers form one group and its 134-byte slot layers
// another — whether or not they are adjacent.
//
//   kvplan::PlanLayout layout(plan, {.chunk_tokens = 256});
//   layout.group(0).layers;                  // {0, 1, 60, 61}
//   layout.page_offset(5, /*page=*/2, kvplan::KvSide::kValue);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "formats/fp8_scales.h"
#include "formats/kv_page_layout.h"
#include "formats/kv_pair.h"
#include "plan/plan.h"

namespace kvplan {

struct LayoutOptions {
  size_t chunk_tokens = 256;  // tokens per cached chunk; a positive multiple of block_size
};

struct LayerPageGeometry {
  int layer = 0;
  int transfer_group = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  KvPair pair;
  KvHeadScales fp8_scales{};  // the plan's per-head FP8 scales (empty sides = 1)
  size_t key_page_bytes = 0;
  size_t value_page_bytes = 0;
  [[nodiscard]] size_t page_bytes() const { return key_page_bytes + value_page_bytes; }
};

struct TransferGroup {
  int index = 0;
  std::vector<int> layers;  // ascending
  int n_kv_heads = 0;
  int head_dim = 0;
  KvPair pair;
  size_t key_page_bytes = 0;
  size_t value_page_bytes = 0;
  size_t layer_stride_bytes = 0;  // one layer's pages of a chunk
  size_t chunk_offset = 0;        // where the group's region starts in a chunk image
  size_t chunk_bytes = 0;         // layers.size() * layer_stride_bytes
};

class PlanLayout {
 public:
  // Throws Error(kInvalidArgument) naming the field for a chunk size that is not a positive
  // multiple of block_size, a kivi plan whose block_size is not a multiple of group_size, or a
  // layer whose formats cannot pack its rows.
  PlanLayout(const Plan& plan, const LayoutOptions& options);

  [[nodiscard]] int n_layers() const { return static_cast<int>(layers_.size()); }
  [[nodiscard]] size_t block_size() const { return block_size_; }
  [[nodiscard]] size_t chunk_tokens() const { return chunk_tokens_; }
  [[nodiscard]] size_t pages_per_chunk() const { return chunk_tokens_ / block_size_; }
  [[nodiscard]] const QuantSettings& settings() const { return settings_; }
  [[nodiscard]] const LayerPageGeometry& layer(int index) const;
  [[nodiscard]] std::span<const LayerPageGeometry> layers() const { return layers_; }
  [[nodiscard]] std::span<const TransferGroup> groups() const { return groups_; }
  [[nodiscard]] const TransferGroup& group(int index) const;
  // Bytes of one chunk's device image (all groups).
  [[nodiscard]] size_t chunk_bytes() const { return chunk_bytes_; }
  // Byte offset of a layer's K or V page inside a chunk image.
  [[nodiscard]] size_t page_offset(int layer, size_t page, KvSide side) const;
  [[nodiscard]] size_t page_bytes(int layer, KvSide side) const;

  // A layer's pages (formats/kv_page_layout.h).
  [[nodiscard]] const KvPageLayout& pages(int layer) const;
  // Packs one page of f32 values [block_size, n_kv_heads, head_dim] into `out`
  // (page_bytes(layer, side) long); FP8 sides use the plan's per-head scales. Slot layers are
  // opaque: Error(kUnimplemented).
  void pack_page(int layer, KvSide side, std::span<const float> values,
                 std::span<uint8_t> out) const;
  void unpack_page(int layer, KvSide side, std::span<const uint8_t> packed,
                   std::span<float> values) const;
  // Values in one page: block_size * n_kv_heads * head_dim.
  [[nodiscard]] size_t page_values(int layer) const;

 private:
  QuantSettings settings_;
  size_t block_size_ = 0;
  size_t chunk_tokens_ = 0;
  size_t chunk_bytes_ = 0;
  std::vector<LayerPageGeometry> layers_;
  std::vector<KvPageLayout> pages_;
  std::vector<TransferGroup> groups_;
};

}  // namespace kvplan
