#include "runtime/plan_layout.h"

#include "core/error.h"
#include "formats/format_size.h"

namespace kvplan {

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
  for (const PlanLayer& l : plan.layers) {
    if (l.per_head()) {
      fail(ErrorCode::kUnimplemented,
           "plan layer {} gives its KV heads different pairs: the runtime's pages hold one pair "
           "per layer (per-KV-head plans run in eval, search and the harness cache; the runtime "
           "does not take them yet)",
           l.index);
    }
  }
  if (plan.layers.size() != g.layers.size()) {
    fail(ErrorCode::kInvalidArgument, "plan lists {} layers for a {}-layer geometry",
         plan.layers.size(), g.layers.size());
  }
  for (int l = 0; l < g.n_layers(); ++l) {
    LayerPageGeometry lg;
    lg.layer = l;
    lg.n_kv_heads = g.layers[l].n_kv_heads;
    lg.head_dim = g.layers[l].head_dim;
    lg.pair = plan.layers[l].pair;
    lg.fp8_scales = plan.layers[l].fp8_scales;
    pages_.emplace_back(l, g.layers[l], lg.pair, lg.fp8_scales, settings_);
    lg.key_page_bytes = pages_.back().page_bytes(KvSide::kKey);
    lg.value_page_bytes = pages_.back().page_bytes(KvSide::kValue);
    // Same geometry and formats -> same transfer group (first-seen order).
    int group = -1;
    for (const TransferGroup& tg : groups_) {
      if (tg.n_kv_heads == lg.n_kv_heads && tg.head_dim == lg.head_dim && tg.pair == lg.pair) {
        group = tg.index;
        break;
      }
    }
    if (group < 0) {
      TransferGroup tg;
      tg.index = static_cast<int>(groups_.size());
      tg.n_kv_heads = lg.n_kv_heads;
      tg.head_dim = lg.head_dim;
      tg.pair = lg.pair;
      tg.key_page_bytes = lg.key_page_bytes;
      tg.value_page_bytes = lg.value_page_bytes;
      tg.layer_stride_bytes = pages_per_chunk() * lg.page_bytes();
      groups_.push_back(tg);
      group = tg.index;
    }
    groups_[group].layers.push_back(l);
    lg.transfer_group = group;
    layers_.push_back(lg);
  }
  size_t offset = 0;
  for (TransferGroup& tg : groups_) {
    tg.chunk_offset = offset;
    tg.chunk_bytes = tg.layers.size() * tg.layer_stride_bytes;
    offset += tg.chunk_bytes;
  }
  chunk_bytes_ = offset;
}

const LayerPageGeometry& PlanLayout::layer(int index) const {
  if (index < 0 || index >= n_layers()) {
    fail(ErrorCode::kOutOfRange, "layer {}: expected 0..{}", index, n_layers() - 1);
  }
  return layers_[index];
}

const TransferGroup& PlanLayout::group(int index) const {
  if (index < 0 || index >= static_cast<int>(groups_.size())) {
    fail(ErrorCode::kOutOfRange, "transfer group {}: expected 0..{}", index,
         static_cast<int>(groups_.size()) - 1);
  }
  return groups_[index];
}

size_t PlanLayout::page_offset(int layer_index, size_t page, KvSide side) const {
  const LayerPageGeometry& lg = layer(layer_index);
  if (page >= pages_per_chunk()) {
    fail(ErrorCode::kOutOfRange, "page {}: a chunk holds {} pages", page, pages_per_chunk());
  }
  const TransferGroup& tg = groups_[lg.transfer_group];
  size_t position = 0;
  while (tg.layers[position] != layer_index) ++position;
  return tg.chunk_offset + position * tg.layer_stride_bytes + page * lg.page_bytes() +
         (side == KvSide::kValue ? lg.key_page_bytes : 0);
}

size_t PlanLayout::page_bytes(int layer_index, KvSide side) const {
  const LayerPageGeometry& lg = layer(layer_index);
  return side == KvSide::kKey ? lg.key_page_bytes : lg.value_page_bytes;
}

size_t PlanLayout::page_values(int layer_index) const {
  return pages(layer_index).page_values();
}

const KvPageLayout& PlanLayout::pages(int layer_index) const {
  (void)layer(layer_index);  // range check
  return pages_[static_cast<size_t>(layer_index)];
}

void PlanLayout::pack_page(int layer_index, KvSide side, std::span<const float> values,
                           std::span<uint8_t> out) const {
  pages(layer_index).pack_page(side, values, out);
}

void PlanLayout::unpack_page(int layer_index, KvSide side, std::span<const uint8_t> packed,
                             std::span<float> values) const {
  pages(layer_index).unpack_page(side, packed, values);
}

}  // namespace kvplan
