#include "runtime/plan_layout.h"

#include "core/error.h"
#include "formats/format_size.h"

namespace kvplan {
namespace {

// Runs a size computation of src/formats, naming the layer and side in its error.
template <typename Size>
size_t page_bytes_for(int layer, const char* side, Size&& size) {
  try {
    return size();
  } catch (const Error& e) {
    fail(e.code(), "layer {} {} page: {}", layer, side, e.what());
  }
}

size_t row_bytes_at(const Format& f, size_t n, size_t group, int layer, const char* side) {
  return page_bytes_for(layer, side, [&] { return packed_row_bytes(f, n, group); });
}

}  // namespace

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
    LayerPageGeometry lg;
    lg.layer = l;
    lg.n_kv_heads = g.layers[l].n_kv_heads;
    lg.head_dim = g.layers[l].head_dim;
    lg.pair = plan.layers[l].pair;
    lg.fp8_scales = plan.layers[l].fp8_scales;
    const size_t heads = static_cast<size_t>(lg.n_kv_heads);
    const size_t dim = static_cast<size_t>(lg.head_dim);
    if (lg.pair.is_slot()) {
      lg.key_page_bytes = block_size_ * heads * lg.pair.key.slot_bytes();
      lg.value_page_bytes = 0;
    } else {
      check_layer_settings(lg.pair, settings_, fmt::format("layer {}", l));
      if (keys_packed_per_channel(lg.pair, settings_)) {
        const size_t gs = settings_.group_size;
        if (block_size_ % gs != 0) {
          fail(ErrorCode::kInvalidArgument,
               "layer {}: key format {} is packed per channel over group_size {} tokens, but "
               "block_size {} is not a multiple of it",
               l, lg.pair.key.name(), gs, block_size_);
        }
        lg.key_page_bytes = block_size_ / gs * heads * page_bytes_for(l, "key", [&] {
                              return channel_group_bytes(lg.pair.key, dim, gs);
                            });
      } else {
        lg.key_page_bytes =
            block_size_ * heads * row_bytes_at(lg.pair.key, dim, settings_.group_size, l, "key");
      }
      lg.value_page_bytes =
          block_size_ * heads * row_bytes_at(lg.pair.value, dim, settings_.group_size, l, "value");
    }
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
  const LayerPageGeometry& lg = layer(layer_index);
  return block_size_ * static_cast<size_t>(lg.n_kv_heads) * static_cast<size_t>(lg.head_dim);
}

bool PlanLayout::kivi_key(const LayerPageGeometry& g, KvSide side) const {
  return side == KvSide::kKey && keys_packed_per_channel(g.pair, settings_);
}

template <typename RowsFn, typename ChannelsFn>
void PlanLayout::for_each_unit(int layer_index, KvSide side, size_t n_values, size_t n_bytes,
                               const PackOptions& options, RowsFn&& rows,
                               ChannelsFn&& channels) const {
  const LayerPageGeometry& lg = layer(layer_index);
  if (lg.pair.is_slot()) {
    fail(ErrorCode::kUnimplemented,
         "layer {}: slot formats are opaque bytes, kvplan cannot pack or unpack them", layer_index);
  }
  if (n_values != page_values(layer_index) || n_bytes != page_bytes(layer_index, side)) {
    fail(ErrorCode::kInvalidArgument,
         "layer {} page: got {} values and {} bytes, expected {} values and {} bytes", layer_index,
         n_values, n_bytes, page_values(layer_index), page_bytes(layer_index, side));
  }
  const Format f = side == KvSide::kKey ? lg.pair.key : lg.pair.value;
  const std::vector<float>& scales = side == KvSide::kKey ? lg.fp8_scales.key : lg.fp8_scales.value;
  PackOptions opt = options;
  opt.group_size = settings_.group_size;
  const size_t heads = static_cast<size_t>(lg.n_kv_heads);
  const size_t dim = static_cast<size_t>(lg.head_dim);
  if (!kivi_key(lg, side)) {
    if (scales.empty()) return rows(f, size_t{0}, size_t{0}, block_size_ * heads, opt);
    // One row at a time, each with its head's FP8 scale.
    const size_t row_bytes = packed_row_bytes(f, dim, opt.group_size);
    for (size_t r = 0; r < block_size_ * heads; ++r) {
      opt.fp8_scale = scales[r % heads];
      rows(f, r * dim, r * row_bytes, size_t{1}, opt);
    }
    return;
  }
  const size_t gs = settings_.group_size;
  const size_t head_bytes = dim * packed_row_bytes(f, gs, gs);
  size_t byte_offset = 0;
  for (size_t t0 = 0; t0 < block_size_; t0 += gs) {
    for (size_t h = 0; h < heads; ++h) {
      if (!scales.empty()) opt.fp8_scale = scales[h];
      channels(f, (t0 * heads + h) * dim, byte_offset, head_bytes, opt);
      byte_offset += head_bytes;
    }
  }
}

void PlanLayout::pack_page(int layer_index, KvSide side, std::span<const float> values,
                           std::span<uint8_t> out, const PackOptions& options) const {
  const LayerPageGeometry& lg = layer(layer_index);
  const size_t dim = static_cast<size_t>(lg.head_dim);
  const size_t stride = static_cast<size_t>(lg.n_kv_heads) * dim;
  const size_t gs = settings_.group_size;
  for_each_unit(
      layer_index, side, values.size(), out.size(), options,
      [&](Format f, size_t v, size_t b, size_t n_rows, const PackOptions& opt) {
        pack_rows(f, values.data() + v, n_rows, dim, out.data() + b, opt);
      },
      [&](Format f, size_t v, size_t b, size_t n_bytes, const PackOptions& opt) {
        pack_channels(f, values.data() + v, gs, dim, stride, out.subspan(b, n_bytes), opt);
      });
}

void PlanLayout::unpack_page(int layer_index, KvSide side, std::span<const uint8_t> packed,
                             std::span<float> values, const PackOptions& options) const {
  const LayerPageGeometry& lg = layer(layer_index);
  const size_t dim = static_cast<size_t>(lg.head_dim);
  const size_t stride = static_cast<size_t>(lg.n_kv_heads) * dim;
  const size_t gs = settings_.group_size;
  for_each_unit(
      layer_index, side, values.size(), packed.size(), options,
      [&](Format f, size_t v, size_t b, size_t n_rows, const PackOptions& opt) {
        unpack_rows(f, packed.data() + b, n_rows, dim, values.data() + v, opt);
      },
      [&](Format f, size_t v, size_t b, size_t n_bytes, const PackOptions& opt) {
        unpack_channels(f, packed.subspan(b, n_bytes), gs, dim, values.data() + v, stride, opt);
      });
}

}  // namespace kvplan
