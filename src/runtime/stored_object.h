// The header every object the runtime writes to a lower tier carries (ARCHITECTURE §3.3), defined
// once. A stored chunk is one record per transfer group, back to back:
//   [StoredObjectHeader][payload: the group's region of the chunk image] ...
// Fields are fixed-width and little-endian (the struct is copied as bytes; big-endian hosts are
// refused at compile time). Payloads are opaque: only their checksum is computed, never a value.
//
//   StoredObjectHeader h = make_object_header(identity, layout, group, chunk_key, payload);
//   RefusalReason r = check_object_header(h, expected);   // kNone or what differs
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "runtime/plan_layout.h"

namespace kvplan {

static_assert(std::endian::native == std::endian::little,
              "stored objects are little-endian byte images of StoredObjectHeader");

inline constexpr uint32_t kStoredObjectMagic = 0x4F43564B;  // "KVCO" read as little-endian bytes
// 2: payload checksums hash each 64 KiB block on its own (a list of block hashes, see
// payload_checksum), so they can be computed by several threads; version 1 objects are refused.
inline constexpr uint16_t kStoredObjectVersion = 2;

struct StoredObjectHeader {
  uint32_t magic;             // kStoredObjectMagic
  uint16_t header_version;    // kStoredObjectVersion
  uint16_t header_bytes;      // sizeof(StoredObjectHeader)
  uint64_t plan_fingerprint;  // plan_fingerprint(plan): formats, geometry and FP8 scales
  uint64_t model_fingerprint;
  uint64_t chunk_key;  // chained hash of the chunk's tokens (chunk_key.h)
  uint32_t chunk_tokens;
  uint16_t transfer_group;
  uint16_t n_transfer_groups;
  // The group's lowest layer and its count of head runs (plan_layout.h; a layer of one pair is one
  // run). Groups need not be contiguous; which runs they hold follows from the plan, pinned by
  // plan_fingerprint.
  uint32_t first_layer;
  uint32_t n_runs;
  uint16_t key_format_id;
  uint16_t key_format_version;
  uint16_t value_format_id;
  uint16_t value_format_version;
  uint32_t key_slot_bytes;    // slot formats only, else 0
  uint32_t value_slot_bytes;  // slot formats only, else 0
  uint32_t block_size;        // tokens per page
  uint32_t n_kv_heads;
  uint32_t head_dim;
  uint16_t quant_mode;  // 0 per-token, 1 kivi (the group's layers run KIVI: layer_runs_kivi)
  uint16_t group_size;
  uint64_t key_page_bytes;  // stride of a K page; V follows in the same page slot
  uint64_t value_page_bytes;
  uint64_t run_stride_bytes;  // one head run's pages of the chunk
  uint64_t payload_bytes;
  uint64_t payload_checksum;  // payload_checksum() of the payload bytes
  uint64_t header_checksum;   // hash of every byte above
};
static_assert(sizeof(StoredObjectHeader) == 128);
static_assert(offsetof(StoredObjectHeader, header_checksum) == 120);

// Why an object was refused; each reason is counted in the runtime's stats.
enum class RefusalReason : uint8_t {
  kNone = 0,
  kTruncated,  // fewer bytes than the header and payload need
  kMagic,
  kHeaderVersion,
  kHeaderChecksum,  // corrupt header bytes
  kPlan,            // written under another plan
  kModel,           // written for another model
  kKey,             // not the chunk it is filed under
  kTransferGroup,   // layer range / group differs
  kFormat,          // K or V format id differs
  kFormatVersion,   // K or V format version differs
  kGeometry,        // block size, heads, head_dim, strides, mode
  kPayloadBytes,
  kChecksum,  // payload bytes corrupt
};
inline constexpr size_t kRefusalReasonCount = 14;
std::string_view refusal_reason_name(RefusalReason reason);

// What a reader expects of every object it loads.
struct ObjectIdentity {
  uint64_t plan_fingerprint = 0;
  uint64_t model_fingerprint = 0;
};

// Checksum of a payload. The payload is cut into blocks of kChecksumBlockBytes (the last one may be
// shorter); each block is hashed on its own, hash64(block), and the checksum is the core Hasher
// over the block hashes in order followed by the payload length:
//   Hasher h; for each block i: h.update_u64(hash64(block_i)); h.update_u64(n); h.digest()
// Blocks are independent, so a checksum can be computed while copying (copy_with_checksum) or by
// several threads at once (ChecksumPool), with the same value.
inline constexpr size_t kChecksumBlockBytes = size_t{64} << 10;
inline constexpr size_t checksum_block_count(size_t n) {
  return (n + kChecksumBlockBytes - 1) / kChecksumBlockBytes;
}
// hash64 of each block of [data, data + n) into out[0 .. checksum_block_count(n)).
void hash_checksum_blocks(const std::byte* data, size_t n, uint64_t* out);
// The checksum from the block hashes of a payload of n bytes.
uint64_t combine_block_hashes(std::span<const uint64_t> block_hashes, size_t n);
uint64_t payload_checksum(const std::byte* data, size_t n);
// Copies n bytes and returns payload_checksum of them, hashing each piece while it is in cache.
uint64_t copy_with_checksum(std::byte* dst, const std::byte* src, size_t n);

// The header for one transfer group of a chunk, payload checksum and header checksum filled in.
StoredObjectHeader make_object_header(const ObjectIdentity& identity, const PlanLayout& layout,
                                      int group, uint64_t chunk_key, uint64_t payload_checksum);
// Recomputes header_checksum after a field changed (tests and tools that rewrite headers).
void seal_object_header(StoredObjectHeader& header);

// Checks everything but the payload checksum; kNone when the header is what `expected` (made by
// make_object_header for the same identity, layout, group and key) says.
RefusalReason check_object_header(const StoredObjectHeader& seen,
                                  const StoredObjectHeader& expected);

// Checks a stored chunk image before any of it is trusted: its size against the records `expected`
// describes (one header + expected[g].payload_bytes per transfer group, back to back), then every
// header against expected[g] with chunk_key = `key`. kNone when all agree. Payload checksums are
// left to the caller, which computes them while it copies (copy_with_checksum).
RefusalReason check_stored_chunk_headers(std::span<const std::byte> stored,
                                         std::span<const StoredObjectHeader> expected,
                                         uint64_t key);

// Bytes of a stored chunk: one header + payload per transfer group.
size_t stored_chunk_bytes(const PlanLayout& layout);

}  // namespace kvplan
