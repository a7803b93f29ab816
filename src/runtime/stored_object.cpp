#include "runtime/stored_object.h"

#include <cstring>

#include "core/hash.h"
#include "core/stream_copy.h"

namespace kvplan {

std::string_view refusal_reason_name(RefusalReason reason) {
  static constexpr std::array<std::string_view, kRefusalReasonCount> kNames = {
      "none",           "truncated", "magic",         "header_version", "header_checksum",
      "plan",           "model",     "key",           "transfer_group", "format",
      "format_version", "geometry",  "payload_bytes", "checksum"};
  const auto i = static_cast<size_t>(reason);
  return i < kNames.size() ? kNames[i] : "unknown";
}

void hash_checksum_blocks(const std::byte* data, size_t n, uint64_t* out) {
  for (size_t off = 0; off < n; off += kChecksumBlockBytes) {
    *out++ = hash64({data + off, std::min(kChecksumBlockBytes, n - off)});
  }
}

uint64_t combine_block_hashes(std::span<const uint64_t> block_hashes, size_t n) {
  Hasher h;
  for (const uint64_t b : block_hashes) h.update_u64(b);
  h.update_u64(n);
  return h.digest();
}

uint64_t payload_checksum(const std::byte* data, size_t n) {
  Hasher h;
  for (size_t off = 0; off < n; off += kChecksumBlockBytes) {
    h.update_u64(hash64({data + off, std::min(kChecksumBlockBytes, n - off)}));
  }
  h.update_u64(n);
  return h.digest();
}

uint64_t copy_with_checksum(std::byte* dst, const std::byte* src, size_t n) {
  // Hash each step of the source while it is in cache, then stream it to dst with non-temporal
  // stores: the source is read from memory once and dst written once, as a large memcpy does.
  Hasher checksum;
  Hasher block;
  for (size_t off = 0; off < n; off += kChecksumBlockBytes) {
    const size_t len = std::min(kChecksumBlockBytes, n - off);
    block.reset();
    copy_nontemporal_visiting(dst + off, src + off, len, [&](const std::byte* piece, size_t m) {
      block.update_raw({piece, m});
    });
    checksum.update_u64(block.digest());
  }
  fence_nontemporal_stores();
  checksum.update_u64(n);
  return checksum.digest();
}

void seal_object_header(StoredObjectHeader& header) {
  header.header_checksum = hash64(
      {reinterpret_cast<const std::byte*>(&header), offsetof(StoredObjectHeader, header_checksum)});
}

StoredObjectHeader make_object_header(const ObjectIdentity& identity, const PlanLayout& layout,
                                      int group, uint64_t chunk_key, uint64_t checksum) {
  const TransferGroup& tg = layout.group(group);
  StoredObjectHeader h;
  std::memset(&h, 0, sizeof h);
  h.magic = kStoredObjectMagic;
  h.header_version = kStoredObjectVersion;
  h.header_bytes = sizeof(StoredObjectHeader);
  h.plan_fingerprint = identity.plan_fingerprint;
  h.model_fingerprint = identity.model_fingerprint;
  h.chunk_key = chunk_key;
  h.chunk_tokens = static_cast<uint32_t>(layout.chunk_tokens());
  h.transfer_group = static_cast<uint16_t>(group);
  h.n_transfer_groups = static_cast<uint16_t>(layout.groups().size());
  h.first_layer = static_cast<uint32_t>(tg.runs.front().layer);
  h.n_runs = static_cast<uint32_t>(tg.runs.size());
  h.key_format_id = static_cast<uint16_t>(tg.pair.key.id());
  h.key_format_version = tg.pair.key.info().version;
  h.value_format_id = static_cast<uint16_t>(tg.pair.value.id());
  h.value_format_version = tg.pair.value.info().version;
  h.key_slot_bytes = tg.pair.key.slot_bytes();
  h.value_slot_bytes = tg.pair.value.slot_bytes();
  h.block_size = static_cast<uint32_t>(layout.block_size());
  h.n_kv_heads = static_cast<uint32_t>(tg.n_kv_heads);
  h.head_dim = static_cast<uint32_t>(tg.head_dim);
  h.quant_mode = layer_runs_kivi(tg.pair, layout.settings()) ? 1 : 0;
  h.group_size = static_cast<uint16_t>(layout.settings().group_size);
  h.key_page_bytes = tg.key_page_bytes;
  h.value_page_bytes = tg.value_page_bytes;
  h.run_stride_bytes = tg.run_stride_bytes;
  h.payload_bytes = tg.chunk_bytes;
  h.payload_checksum = checksum;
  seal_object_header(h);
  return h;
}

RefusalReason check_object_header(const StoredObjectHeader& s, const StoredObjectHeader& e) {
  if (s.magic != kStoredObjectMagic) return RefusalReason::kMagic;
  if (s.header_version != kStoredObjectVersion || s.header_bytes != sizeof(StoredObjectHeader)) {
    return RefusalReason::kHeaderVersion;
  }
  StoredObjectHeader resealed = s;
  seal_object_header(resealed);
  if (resealed.header_checksum != s.header_checksum) return RefusalReason::kHeaderChecksum;
  if (s.plan_fingerprint != e.plan_fingerprint) return RefusalReason::kPlan;
  if (s.model_fingerprint != e.model_fingerprint) return RefusalReason::kModel;
  if (s.chunk_key != e.chunk_key || s.chunk_tokens != e.chunk_tokens) return RefusalReason::kKey;
  if (s.transfer_group != e.transfer_group || s.n_transfer_groups != e.n_transfer_groups ||
      s.first_layer != e.first_layer || s.n_runs != e.n_runs) {
    return RefusalReason::kTransferGroup;
  }
  if (s.key_format_id != e.key_format_id || s.value_format_id != e.value_format_id ||
      s.key_slot_bytes != e.key_slot_bytes || s.value_slot_bytes != e.value_slot_bytes) {
    return RefusalReason::kFormat;
  }
  if (s.key_format_version != e.key_format_version ||
      s.value_format_version != e.value_format_version) {
    return RefusalReason::kFormatVersion;
  }
  if (s.block_size != e.block_size || s.n_kv_heads != e.n_kv_heads || s.head_dim != e.head_dim ||
      s.quant_mode != e.quant_mode || s.group_size != e.group_size ||
      s.key_page_bytes != e.key_page_bytes || s.value_page_bytes != e.value_page_bytes ||
      s.run_stride_bytes != e.run_stride_bytes) {
    return RefusalReason::kGeometry;
  }
  if (s.payload_bytes != e.payload_bytes) return RefusalReason::kPayloadBytes;
  return RefusalReason::kNone;
}

RefusalReason check_stored_chunk_headers(std::span<const std::byte> stored,
                                         std::span<const StoredObjectHeader> expected,
                                         uint64_t key) {
  size_t need = 0;
  for (const StoredObjectHeader& e : expected) need += sizeof(StoredObjectHeader) + e.payload_bytes;
  if (stored.size() < need) return RefusalReason::kTruncated;
  if (stored.size() > need) return RefusalReason::kPayloadBytes;
  size_t record = 0;
  for (const StoredObjectHeader& e : expected) {
    StoredObjectHeader seen;
    std::memcpy(&seen, stored.data() + record, sizeof seen);
    StoredObjectHeader want = e;
    want.chunk_key = key;
    const RefusalReason r = check_object_header(seen, want);
    if (r != RefusalReason::kNone) return r;
    record += sizeof(StoredObjectHeader) + e.payload_bytes;
  }
  return RefusalReason::kNone;
}

size_t stored_chunk_bytes(const PlanLayout& layout) {
  return layout.groups().size() * sizeof(StoredObjectHeader) + layout.chunk_bytes();
}

}  // namespace kvplan
