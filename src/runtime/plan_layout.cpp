#include "runtime/plan_layout.h"

#include "core/error.h"
#include "formats/format_size.h"

namespace kvplan {

size_t LayerPageGeometry::page_bytes() const {
  size_t bytes = 0;
  for (const PageRun& r : runs) bytes += r.page_bytes();
  return bytes;
}

PlanLayout::PlanLayout(const Plan& plan, const LayoutOptions& options)
    : settings_(plan.quantization),
      block_size_(plan.quantization.block_size),
      chunk_tokens_(options.chunk_tokens) {
  if (block_size_ == 0) fail(ErrorCode::kInvalidArgument, "plan block_size 0: expected >= 1");
  if (chunk_tokens_ == 0 || chunk_tokens_ % block_size_ != 0) {
    fail(ErrorCode::kInvalidArgument,
         "chunk_tokens {}: expected a positive multiple of the plan's block_size {}", chunk_tokens_,
         block_size_);
  }
  const KvGeometry& g = plan.model.geometry;
  if (plan.layers.size() != g.layers.size()) {
    fail(ErrorCode::kInvalidArgument, "plan lists {} layers for a {}-layer geometry",
         plan.layers.size(), g.layers.size());
  }
  for (int l = 0; l < g.n_layers(); ++l) {
    const PlanLayer& planned = plan.layers[static_cast<size_t>(l)];
    const KvLayerGeometry& geometry = g.layers[static_cast<size_t>(l)];
    LayerPageGeometry lg;
    lg.layer = l;
    lg.n_kv_heads = geometry.n_kv_heads;
    lg.head_dim = geometry.head_dim;
    std::vector<KvHeadRun> head_runs;
    if (planned.per_head()) {
      if (planned.heads.size() != static_cast<size_t>(geometry.n_kv_heads)) {
        fail(ErrorCode::kInvalidArgument, "plan layer {} lists {} KV heads' pairs, expected {}", l,
             planned.heads.size(), geometry.n_kv_heads);
      }
      head_runs = kv_head_runs(planned.heads);
    } else {
      head_runs = {{0, geometry.n_kv_heads, planned.pair}};
    }
    std::vector<KvPageLayout>& layer_pages = pages_.emplace_back();
    for (const KvHeadRun& hr : head_runs) {
      PageRun r;
      r.layer = l;
      r.run = static_cast<int>(lg.runs.size());
      r.first_head = hr.first_head;
      r.n_kv_heads = hr.n_heads;
      r.head_dim = geometry.head_dim;
      r.pair = hr.pair;
      r.fp8_scales = planned.per_head()
                         ? head_run_scales(l, planned.fp8_scales, hr, geometry.n_kv_heads)
                         : planned.fp8_scales;
      layer_pages.emplace_back(l, head_run_geometry(geometry, hr), r.pair, r.fp8_scales, settings_);
      r.key_page_bytes = layer_pages.back().page_bytes(KvSide::kKey);
      r.value_page_bytes = layer_pages.back().page_bytes(KvSide::kValue);
      // The same page format -> the same transfer group (first-seen order).
      int group = -1;
      for (const TransferGroup& tg : groups_) {
        if (tg.n_kv_heads == r.n_kv_heads && tg.head_dim == r.head_dim && tg.pair == r.pair) {
          group = tg.index;
          break;
        }
      }
      if (group < 0) {
        TransferGroup tg;
        tg.index = static_cast<int>(groups_.size());
        tg.n_kv_heads = r.n_kv_heads;
        tg.head_dim = r.head_dim;
        tg.pair = r.pair;
        tg.key_page_bytes = r.key_page_bytes;
        tg.value_page_bytes = r.value_page_bytes;
        tg.run_stride_bytes = pages_per_chunk() * r.page_bytes();
        groups_.push_back(tg);
        group = tg.index;
      }
      TransferGroup& tg = groups_[static_cast<size_t>(group)];
      r.transfer_group = group;
      r.group_position = static_cast<int>(tg.runs.size());
      tg.runs.push_back({l, r.run});
      lg.runs.push_back(std::move(r));
    }
    layers_.push_back(std::move(lg));
  }
  size_t offset = 0;
  for (TransferGroup& tg : groups_) {
    tg.chunk_offset = offset;
    tg.chunk_bytes = tg.runs.size() * tg.run_stride_bytes;
    offset += tg.chunk_bytes;
  }
  chunk_bytes_ = offset;
}

const LayerPageGeometry& PlanLayout::layer(int index) const {
  if (index < 0 || index >= n_layers()) {
    fail(ErrorCode::kOutOfRange, "layer {}: expected 0..{}", index, n_layers() - 1);
  }
  return layers_[static_cast<size_t>(index)];
}

const PageRun& PlanLayout::run(int layer_index, int run_index) const {
  const LayerPageGeometry& lg = layer(layer_index);
  if (run_index < 0 || run_index >= static_cast<int>(lg.runs.size())) {
    fail(ErrorCode::kOutOfRange, "layer {} head run {}: the layer has {} run{}", layer_index,
         run_index, lg.runs.size(), lg.runs.size() == 1 ? "" : "s");
  }
  return lg.runs[static_cast<size_t>(run_index)];
}

const TransferGroup& PlanLayout::group(int index) const {
  if (index < 0 || index >= static_cast<int>(groups_.size())) {
    fail(ErrorCode::kOutOfRange, "transfer group {}: expected 0..{}", index,
         static_cast<int>(groups_.size()) - 1);
  }
  return groups_[static_cast<size_t>(index)];
}

size_t PlanLayout::page_offset(int layer_index, size_t page, KvSide side, int run_index) const {
  const PageRun& r = run(layer_index, run_index);
  if (page >= pages_per_chunk()) {
    fail(ErrorCode::kOutOfRange, "page {}: a chunk holds {} pages", page, pages_per_chunk());
  }
  const TransferGroup& tg = groups_[static_cast<size_t>(r.transfer_group)];
  return tg.chunk_offset + static_cast<size_t>(r.group_position) * tg.run_stride_bytes +
         page * r.page_bytes() + (side == KvSide::kValue ? r.key_page_bytes : 0);
}

size_t PlanLayout::page_bytes(int layer_index, KvSide side, int run_index) const {
  const PageRun& r = run(layer_index, run_index);
  return side == KvSide::kKey ? r.key_page_bytes : r.value_page_bytes;
}

size_t PlanLayout::page_values(int layer_index, int run_index) const {
  return pages(layer_index, run_index).page_values();
}

const KvPageLayout& PlanLayout::pages(int layer_index, int run_index) const {
  (void)run(layer_index, run_index);  // range check
  return pages_[static_cast<size_t>(layer_index)][static_cast<size_t>(run_index)];
}

void PlanLayout::pack_page(int layer_index, KvSide side, std::span<const float> values,
                           std::span<uint8_t> out, int run_index) const {
  pages(layer_index, run_index).pack_page(side, values, out);
}

void PlanLayout::unpack_page(int layer_index, KvSide side, std::span<const uint8_t> packed,
                             std::span<float> values, int run_index) const {
  pages(layer_index, run_index).unpack_page(side, packed, values);
}

}  // namespace kvplan
