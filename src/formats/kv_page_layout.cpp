#include "formats/kv_page_layout.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format_size.h"

namespace kvplan {
namespace {

// Runs a size computation of format_size.h, naming the layer and side in its error.
template <typename Size>
size_t sized(int layer, const char* side, Size&& size) {
  try {
    return size();
  } catch (const Error& e) {
    fail(e.code(), "layer {} {} page: {}", layer, side, e.what());
  }
}

}  // namespace

KvPageLayout::KvPageLayout(int layer, const KvLayerGeometry& geometry, const KvPair& pair,
                           KvHeadScales fp8_scales, const QuantSettings& settings)
    : layer_(layer),
      n_kv_heads_(geometry.n_kv_heads),
      head_dim_(geometry.head_dim),
      pair_(pair),
      fp8_scales_(std::move(fp8_scales)),
      settings_(settings) {
  const size_t block = settings_.block_size;
  const size_t heads = static_cast<size_t>(n_kv_heads_);
  const size_t dim = static_cast<size_t>(head_dim_);
  if (block == 0) fail(ErrorCode::kInvalidArgument, "layer {}: block_size 0: expected >= 1", layer);
  if (pair_.is_slot()) {
    key_row_bytes_ = pair_.key.slot_bytes();
    key_page_bytes_ = block * heads * key_row_bytes_;
    return;
  }
  check_layer_settings(pair_, settings_, fmt::format("layer {}", layer));
  check_fp8_scales(fp8_scales_, pair_, n_kv_heads_, fmt::format("layer {}", layer));
  keys_per_channel_ = keys_packed_per_channel(pair_, settings_);
  const size_t gs = settings_.group_size;
  if (keys_per_channel_) {
    if (block % gs != 0) {
      fail(ErrorCode::kInvalidArgument,
           "layer {}: key format {} is packed per channel over group_size {} tokens, but "
           "block_size {} is not a multiple of it",
           layer, pair_.key.name(), gs, block);
    }
    key_row_bytes_ = sized(layer, "key", [&] { return channel_group_bytes(pair_.key, dim, gs); });
    key_page_bytes_ = block / gs * heads * key_row_bytes_;
  } else {
    key_row_bytes_ = sized(layer, "key", [&] { return packed_row_bytes(pair_.key, dim, gs); });
    key_page_bytes_ = block * heads * key_row_bytes_;
    key_rotation_span_ = kvplan::rotation_span(pair_.key, dim);
  }
  value_rotation_span_ = kvplan::rotation_span(pair_.value, dim);
  value_row_bytes_ = sized(layer, "value", [&] { return packed_row_bytes(pair_.value, dim, gs); });
  value_page_bytes_ = block * heads * value_row_bytes_;
}

size_t KvPageLayout::page_values() const {
  return settings_.block_size * static_cast<size_t>(n_kv_heads_) * static_cast<size_t>(head_dim_);
}

size_t KvPageLayout::unpack_scratch_floats() const {
  return keys_per_channel_ ? settings_.group_size * static_cast<size_t>(head_dim_) : 0;
}

PackOptions KvPageLayout::options(KvSide side, int head) const {
  return {.group_size = settings_.group_size,
          .fp8_scale =
              side == KvSide::kKey ? fp8_scales_.key_scale(head) : fp8_scales_.value_scale(head)};
}

void KvPageLayout::require_packable(const char* call) const {
  if (pair_.is_slot()) {
    fail(ErrorCode::kUnimplemented,
         "layer {}: {}: slot formats are opaque bytes, kvplan cannot pack or unpack them", layer_,
         call);
  }
}

void KvPageLayout::pack_tokens(KvSide side, uint8_t* page, size_t first, size_t n,
                               const float* rows, size_t row_stride) const {
  require_packable("pack_tokens");
  const size_t block = settings_.block_size;
  const size_t heads = static_cast<size_t>(n_kv_heads_);
  const size_t dim = static_cast<size_t>(head_dim_);
  if (first + n > block) {
    fail(ErrorCode::kInvalidArgument, "layer {}: tokens [{}, {}) of a page of {}", layer_, first,
         first + n, block);
  }
  const Format f = format(side);
  if (per_channel(side)) {
    const size_t gs = settings_.group_size;
    if (first % gs != 0 || n % gs != 0) {
      fail(ErrorCode::kInternal, "layer {}: per-channel keys pack whole groups of {}, got [{}, {})",
           layer_, gs, first, first + n);
    }
    for (size_t t = 0; t < n; t += gs) {
      for (size_t h = 0; h < heads; ++h) {
        uint8_t* record = page + ((first + t) / gs * heads + h) * key_row_bytes_;
        pack_channels(f, rows + t * row_stride + h * dim, gs, dim, row_stride,
                      {record, key_row_bytes_}, options(side, static_cast<int>(h)));
      }
    }
    return;
  }
  const size_t row_bytes = side == KvSide::kKey ? key_row_bytes_ : value_row_bytes_;
  // A token's heads are contiguous in the rows and in the page: one call per head, over the
  // tokens, so each head keeps its own FP8 scale.
  for (size_t h = 0; h < heads; ++h) {
    pack_rows_strided(f, rows + h * dim, row_stride, n, dim, page + (first * heads + h) * row_bytes,
                      heads * row_bytes, options(side, static_cast<int>(h)));
  }
}

void KvPageLayout::unpack_head(KvSide side, const uint8_t* page, int head, size_t first, size_t n,
                               float* out, std::span<float> scratch, bool rotated_domain) const {
  require_packable("unpack_head");
  const size_t heads = static_cast<size_t>(n_kv_heads_);
  const size_t dim = static_cast<size_t>(head_dim_);
  const size_t h = static_cast<size_t>(head);
  const Format f = format(side);
  if (!per_channel(side)) {
    const size_t row_bytes = side == KvSide::kKey ? key_row_bytes_ : value_row_bytes_;
    PackOptions unpack = options(side, head);
    unpack.rotated_domain = rotated_domain;
    unpack_rows_strided(f, page + (first * heads + h) * row_bytes, heads * row_bytes, n, dim, out,
                        dim, unpack);
    return;
  }
  // Per-channel keys: unpack each group the tokens touch, keep the rows asked for.
  const size_t gs = settings_.group_size;
  if (scratch.size() < gs * dim) {
    fail(ErrorCode::kInternal, "layer {}: unpack scratch of {} floats, {} needed", layer_,
         scratch.size(), gs * dim);
  }
  for (size_t t = first; t < first + n;) {
    const size_t group = t / gs;
    const uint8_t* record = page + (group * heads + h) * key_row_bytes_;
    unpack_channels(f, {record, key_row_bytes_}, gs, dim, scratch.data(), dim, options(side, head));
    const size_t end = std::min(first + n, (group + 1) * gs);
    std::copy(scratch.begin() + static_cast<std::ptrdiff_t>((t - group * gs) * dim),
              scratch.begin() + static_cast<std::ptrdiff_t>((end - group * gs) * dim),
              out + (t - first) * dim);
    t = end;
  }
}

void KvPageLayout::pack_page(KvSide side, std::span<const float> values,
                             std::span<uint8_t> out) const {
  require_packable("pack_page");
  if (values.size() != page_values() || out.size() != page_bytes(side)) {
    fail(ErrorCode::kInvalidArgument,
         "layer {} page: got {} values and {} bytes, expected {} values and {} bytes", layer_,
         values.size(), out.size(), page_values(), page_bytes(side));
  }
  const size_t stride = static_cast<size_t>(n_kv_heads_) * static_cast<size_t>(head_dim_);
  pack_tokens(side, out.data(), 0, settings_.block_size, values.data(), stride);
}

void KvPageLayout::unpack_page(KvSide side, std::span<const uint8_t> packed,
                               std::span<float> values) const {
  require_packable("unpack_page");
  if (values.size() != page_values() || packed.size() != page_bytes(side)) {
    fail(ErrorCode::kInvalidArgument,
         "layer {} page: got {} values and {} bytes, expected {} values and {} bytes", layer_,
         values.size(), packed.size(), page_values(), page_bytes(side));
  }
  const size_t block = settings_.block_size;
  const size_t dim = static_cast<size_t>(head_dim_);
  const size_t heads = static_cast<size_t>(n_kv_heads_);
  std::vector<float> head_rows(block * dim), scratch(unpack_scratch_floats());
  for (size_t h = 0; h < heads; ++h) {
    unpack_head(side, packed.data(), static_cast<int>(h), 0, block, head_rows.data(), scratch);
    for (size_t t = 0; t < block; ++t) {
      std::copy_n(head_rows.data() + t * dim, dim, values.data() + (t * heads + h) * dim);
    }
  }
}

std::vector<KvHeadRun> kv_head_runs(std::span<const KvPair> head_pairs) {
  std::vector<KvHeadRun> runs;
  for (size_t h = 0; h < head_pairs.size(); ++h) {
    if (runs.empty() || runs.back().pair != head_pairs[h]) {
      runs.push_back({static_cast<int>(h), 0, head_pairs[h]});
    }
    ++runs.back().n_heads;
  }
  return runs;
}

KvLayerGeometry head_run_geometry(const KvLayerGeometry& layer, const KvHeadRun& run) {
  KvLayerGeometry g = layer;
  g.n_kv_heads = run.n_heads;
  return g;
}

KvHeadScales head_run_scales(int layer, const KvHeadScales& layer_scales, const KvHeadRun& run,
                             int n_kv_heads) {
  const auto side = [&](const std::vector<float>& scales, Format format, const char* which) {
    if (scales.empty() || !format.has_tensor_scale()) return std::vector<float>{};
    if (scales.size() != static_cast<size_t>(n_kv_heads)) {
      fail(ErrorCode::kInvalidArgument, "layer {}: {} FP8 {} scales, expected one per KV head ({})",
           layer, scales.size(), which, n_kv_heads);
    }
    const auto first = scales.begin() + run.first_head;
    return std::vector<float>(first, first + run.n_heads);
  };
  return {side(layer_scales.key, run.pair.key, "key"),
          side(layer_scales.value, run.pair.value, "value")};
}

}  // namespace kvplan
