// PlanLayout: how a precision plan's KV pages are laid out in bytes, and how they are grouped for
// transfers. A layer's pages are formats/kv_page_layout.h's (the harness's cache holds the same
// bytes): block_size tokens of its KV heads, keys and values apart. A layer whose KV heads take
// different pairs (per-KV-head plans, plan.json v3) is paged as its head runs (KvHeadRun: the
// consecutive heads of one pair), each run a layer of its heads alone; a layer of one pair is one
// run of all its heads.
// A chunk (chunk_tokens, a multiple of block_size) is the unit the runtime caches. Its device image
// places transfer groups back to back, so each group moves with one copy:
//   chunk  : [group 0 region][group 1 region]...
//   group  : [head runs of the group, in (layer, run) order][pages of the chunk][K page][V page]
// Runs share a transfer group when their page format is identical: heads per page, head_dim and
// (K, V) formats, e.g. MiniMax-M2.5's bf16 edge layers form one group and its 134-byte slot layers
// another, whether or not they are adjacent. One page format per group, per head run or per layer.
//
//   kvplan::PlanLayout layout(plan, {.chunk_tokens = 256});
//   layout.group(0).runs;                    // {{0, 0}, {1, 0}, {60, 0}, {61, 0}}: (layer, run)
//   layout.page_offset(5, /*page=*/2, kvplan::KvSide::kValue);          // a layer of one pair
//   layout.page_offset(5, /*page=*/2, kvplan::KvSide::kValue, /*run=*/1);  // a per-head layer
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

// One head run of a layer: the K and V page format of its heads.
struct PageRun {
  int layer = 0;
  int run = 0;  // index among the layer's runs
  int first_head = 0;
  int n_kv_heads = 0;  // heads in the run
  int head_dim = 0;
  int transfer_group = 0;
  int group_position = 0;  // index among the transfer group's runs
  KvPair pair;
  KvHeadScales fp8_scales{};  // the plan's FP8 scales of the run's heads (empty sides = 1)
  size_t key_page_bytes = 0;
  size_t value_page_bytes = 0;
  [[nodiscard]] size_t page_bytes() const { return key_page_bytes + value_page_bytes; }
};

struct LayerPageGeometry {
  int layer = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  std::vector<PageRun> runs;  // in head order; one for a layer of one pair
  [[nodiscard]] bool per_head() const { return runs.size() > 1; }
  // One page of tokens of the whole layer: every run's K and V page.
  [[nodiscard]] size_t page_bytes() const;
};

struct HeadRunRef {
  int layer = 0;
  int run = 0;
  bool operator==(const HeadRunRef&) const = default;
};

struct TransferGroup {
  int index = 0;
  std::vector<HeadRunRef> runs;  // ascending (layer, run)
  int n_kv_heads = 0;            // heads per page
  int head_dim = 0;
  KvPair pair;
  size_t key_page_bytes = 0;
  size_t value_page_bytes = 0;
  size_t run_stride_bytes = 0;  // one head run's pages of a chunk
  size_t chunk_offset = 0;      // where the group's region starts in a chunk image
  size_t chunk_bytes = 0;       // runs.size() * run_stride_bytes
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
  // A layer's head run (Error(kOutOfRange) for a run the layer does not have).
  [[nodiscard]] const PageRun& run(int layer, int run) const;
  [[nodiscard]] std::span<const TransferGroup> groups() const { return groups_; }
  [[nodiscard]] const TransferGroup& group(int index) const;
  // Bytes of one chunk's device image (all groups).
  [[nodiscard]] size_t chunk_bytes() const { return chunk_bytes_; }

  // A head run's pages: `run` 0 is a layer of one pair's only run. Byte offset of its K or V page
  // inside a chunk image, and the page's bytes.
  [[nodiscard]] size_t page_offset(int layer, size_t page, KvSide side, int run = 0) const;
  [[nodiscard]] size_t page_bytes(int layer, KvSide side, int run = 0) const;
  // A head run's page format (formats/kv_page_layout.h).
  [[nodiscard]] const KvPageLayout& pages(int layer, int run = 0) const;
  // Packs one page of f32 values [block_size, heads of the run, head_dim] into `out`
  // (page_bytes(layer, side, run) long); FP8 sides use the plan's per-head scales. Slot layers are
  // opaque: Error(kUnimplemented).
  void pack_page(int layer, KvSide side, std::span<const float> values, std::span<uint8_t> out,
                 int run = 0) const;
  void unpack_page(int layer, KvSide side, std::span<const uint8_t> packed, std::span<float> values,
                   int run = 0) const;
  // Values in one page of a head run: block_size * heads of the run * head_dim.
  [[nodiscard]] size_t page_values(int layer, int run = 0) const;

 private:
  QuantSettings settings_;
  size_t block_size_ = 0;
  size_t chunk_tokens_ = 0;
  size_t chunk_bytes_ = 0;
  std::vector<LayerPageGeometry> layers_;
  std::vector<std::vector<KvPageLayout>> pages_;  // [layer][run]
  std::vector<TransferGroup> groups_;
};

}  // namespace kvplan
