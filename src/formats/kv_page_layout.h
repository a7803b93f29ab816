// The bytes of one layer's KV pages: the one page format of the harness's cache
// (src/model/kv_cache.h) and of the runtime's chunks (src/runtime/plan_layout.h), so that pages
// move between them as bytes, never re-quantized.
//
// A page holds `block_size` tokens of one layer for all its KV heads, keys and values apart:
//   per-token K or V page : [block_size tokens][n_kv_heads][packed row of head_dim values]
//   per-channel K page    : [block_size / group_size token groups][n_kv_heads][head_dim channels]
//                           [packed row of group_size tokens]   (KIVI keys; plain formats stay
//                           per token, which packs them the same)
//   slot page (K only)    : [block_size tokens][n_kv_heads][slot_bytes]   (opaque; V page empty)
// FP8 and NVFP4 sides take their head's scale (KvHeadScales; 1 where none).
//
//   KvPageLayout pages(3, {3, 64, 0}, KvPair::parse("q4_0/q4_0"), {}, settings);
//   pages.page_bytes(KvSide::kKey);                        // 32 tokens x 3 heads x 18 B = 1728
//   pages.pack_tokens(KvSide::kKey, page, 0, 8, rows, 192);  // tokens 0..7 of the page
//   pages.unpack_head(KvSide::kKey, page, 1, 0, 8, out, scratch);  // head 1: [8, 64] f32
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "formats/fp8_scales.h"
#include "formats/kv_geometry.h"
#include "formats/kv_pair.h"
#include "formats/pack.h"
#include "formats/quant_settings.h"

namespace kvplan {

enum class KvSide : uint8_t { kKey = 0, kValue = 1 };

class KvPageLayout {
 public:
  // Throws Error(kInvalidArgument) naming the layer and side when a format cannot pack the layer's
  // rows, the settings cannot hold it (check_layer_settings), or per-channel keys do not fill a
  // page with whole groups (block_size a multiple of group_size).
  KvPageLayout(int layer, const KvLayerGeometry& geometry, const KvPair& pair,
               KvHeadScales fp8_scales, const QuantSettings& settings);

  [[nodiscard]] int layer() const { return layer_; }
  [[nodiscard]] int n_kv_heads() const { return n_kv_heads_; }
  [[nodiscard]] int head_dim() const { return head_dim_; }
  [[nodiscard]] const KvPair& pair() const { return pair_; }
  [[nodiscard]] const KvHeadScales& fp8_scales() const { return fp8_scales_; }
  [[nodiscard]] const QuantSettings& settings() const { return settings_; }
  [[nodiscard]] size_t block_size() const { return settings_.block_size; }
  [[nodiscard]] bool is_slot() const { return pair_.is_slot(); }
  // Keys packed per channel over group_size tokens (KIVI): pack and unpack whole groups.
  [[nodiscard]] bool keys_per_channel() const { return keys_per_channel_; }
  [[nodiscard]] size_t page_bytes(KvSide side) const {
    return side == KvSide::kKey ? key_page_bytes_ : value_page_bytes_;
  }
  // Values in one page: block_size * n_kv_heads * head_dim.
  [[nodiscard]] size_t page_values() const;
  // Floats unpack_head needs as scratch (a per-channel key group of one head), else 0.
  [[nodiscard]] size_t unpack_scratch_floats() const;

  // Packs tokens [first, first + n) of a page from f32 rows [n][n_kv_heads * head_dim] that are
  // `row_stride` floats apart; per-channel keys take whole groups (first and n multiples of
  // group_size). Slot layers are opaque: Error(kUnimplemented).
  void pack_tokens(KvSide side, uint8_t* page, size_t first, size_t n, const float* rows,
                   size_t row_stride) const;
  // Tokens [first, first + n) of KV head `head` from a page into out [n, head_dim]: bit for bit
  // the values a pack/unpack round trip of those rows gives. `scratch` holds
  // unpack_scratch_floats() floats. `rotated_domain`: a side with a rotation_span leaves its rows
  // rotated (hadamard_transform of each span gives the round trip's bits); others ignore it.
  void unpack_head(KvSide side, const uint8_t* page, int head, size_t first, size_t n, float* out,
                   std::span<float> scratch, bool rotated_domain = false) const;
  // The Hadamard span (formats/pack.h rotation_span) of a side's rows in the rotated domain; 0 when
  // the side has none (plain and block formats, per-channel keys, slots).
  [[nodiscard]] int rotation_span(KvSide side) const {
    return side == KvSide::kKey ? key_rotation_span_ : value_rotation_span_;
  }

  // A whole page: f32 values [block_size, n_kv_heads, head_dim] <-> page_bytes(side) bytes.
  // Throws Error(kInvalidArgument) for spans of other sizes.
  void pack_page(KvSide side, std::span<const float> values, std::span<uint8_t> out) const;
  void unpack_page(KvSide side, std::span<const uint8_t> packed, std::span<float> values) const;

 private:
  [[nodiscard]] bool per_channel(KvSide side) const {
    return side == KvSide::kKey && keys_per_channel_;
  }
  [[nodiscard]] Format format(KvSide side) const {
    return side == KvSide::kKey ? pair_.key : pair_.value;
  }
  [[nodiscard]] PackOptions options(KvSide side, int head) const;
  void require_packable(const char* call) const;

  int layer_;
  int n_kv_heads_;
  int head_dim_;
  KvPair pair_;
  KvHeadScales fp8_scales_;
  QuantSettings settings_;
  bool keys_per_channel_ = false;
  size_t key_row_bytes_ = 0;    // a per-token key row, or a per-channel (group, head) record
  size_t value_row_bytes_ = 0;  // a per-token value row
  size_t key_page_bytes_ = 0;
  size_t value_page_bytes_ = 0;
  int key_rotation_span_ = 0;
  int value_rotation_span_ = 0;
};

// Per-KV-head layers (plan.json v3): a run of consecutive KV heads taking one pair is paged as a
// layer of those heads alone. Every format packs one head's row on its own, so a head's bytes do
// not depend on its neighbours'. A layer of one pair is one run; the harness's cache and the
// runtime's chunks both lay a layer out as its runs' pages, in head order.
struct KvHeadRun {
  int first_head = 0;
  int n_heads = 0;
  KvPair pair;
};
// The maximal runs of consecutive equal pairs, in head order.
std::vector<KvHeadRun> kv_head_runs(std::span<const KvPair> head_pairs);
// A run's geometry: the layer's, holding the run's heads only.
KvLayerGeometry head_run_geometry(const KvLayerGeometry& layer, const KvHeadRun& run);
// The run's heads' FP8 scales on the sides its formats scale (empty elsewhere). Throws
// Error(kInvalidArgument) naming the layer for a side whose scales are not one per KV head.
KvHeadScales head_run_scales(int layer, const KvHeadScales& layer_scales, const KvHeadRun& run,
                             int n_kv_heads);

}  // namespace kvplan
