// PlanLayout: how a precision plan's KV pages are laid out in bytes, and how layers are grouped for
// transfers. Every size comes from src/formats (packed_row_bytes) under the plan's settings.
//
// A page holds `block_size` tokens of one layer for all its KV heads, keys and values separately:
//   per-token K or V page : [block_size tokens][n_kv_heads][packed row of head_dim values]
//   kivi K page           : [block_size / group_size token groups][n_kv_heads][head_dim channels]
//                           [packed row of group_size tokens]   (plain K formats stay per-token)
//   slot page (K only)    : [block_size tokens][n_kv_heads][slot_bytes]   (opaque, V page empty)
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
#include "formats/kv_pair.h"
#include "formats/pack.h"
#include "plan/plan.h"

namespace kvplan {

enum class KvSide : uint8_t { kKey = 0, kValue = 1 };

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

  // Packs one page of f32 values [block_size, n_kv_heads, head_dim] into `out`
  // (page_bytes(layer, side) long); FP8 sides use the plan's per-head scales, not
  // options.fp8_scale. Slot layers are opaque: Error(kUnimplemented).
  void pack_page(int layer, KvSide side, std::span<const float> values, std::span<uint8_t> out,
                 const PackOptions& options = {}) const;
  void unpack_page(int layer, KvSide side, std::span<const uint8_t> packed, std::span<float> values,
                   const PackOptions& options = {}) const;
  // Values in one page: block_size * n_kv_heads * head_dim.
  [[nodiscard]] size_t page_values(int layer) const;

 private:
  [[nodiscard]] bool kivi_key(const LayerPageGeometry& g, KvSide side) const;
  // Checks a pack/unpack call, then visits the page's units in byte order with their options:
  // rows(format, value_offset, byte_offset, n_rows, options) for per-token rows (all at once, or
  // one at a time when the side has per-head FP8 scales), channels(format, value_offset,
  // byte_offset, n_bytes, options) for each (token group, head) of KIVI keys.
  template <typename RowsFn, typename ChannelsFn>
  void for_each_unit(int layer, KvSide side, size_t n_values, size_t n_bytes,
                     const PackOptions& options, RowsFn&& rows, ChannelsFn&& channels) const;

  QuantSettings settings_;
  size_t block_size_ = 0;
  size_t chunk_tokens_ = 0;
  size_t chunk_bytes_ = 0;
  std::vector<LayerPageGeometry> layers_;
  std::vector<TransferGroup> groups_;
};

}  // namespace kvplan
