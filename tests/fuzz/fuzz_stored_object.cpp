// Stored KV objects (chunk files in a disk-tier directory, written by this or another process):
// the checks the runtime's chunk loader makes before it trusts a chunk — size, every header, every
// payload checksum (OffloadRuntime's copy_in). The first input byte picks a variant: odd means the
// headers are resealed first, standing for an object another kvplan wrote with other settings (so
// the field checks behind the header checksum are reached); the rest is the chunk file.
#include "fuzz/fuzz_target.h"
#include "fuzz/stored_chunk_fixture.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvplan;
  static const fuzz::StoredChunkFixture fixture;
  if (size == 0) return 0;
  std::vector<std::byte> chunk(fuzz::as_bytes(data + 1, size - 1).begin(),
                               fuzz::as_bytes(data + 1, size - 1).end());
  if ((data[0] & 1) != 0) {
    for (size_t at = 0; at + sizeof(StoredObjectHeader) <= chunk.size();) {
      StoredObjectHeader h;
      std::memcpy(&h, chunk.data() + at, sizeof h);
      seal_object_header(h);
      std::memcpy(chunk.data() + at, &h, sizeof h);
      if (h.payload_bytes > chunk.size() - at - sizeof h) break;
      at += sizeof h + h.payload_bytes;
    }
  }
  if (check_stored_chunk_headers(chunk, fixture.expected, fuzz::kChunkKey) !=
      RefusalReason::kNone) {
    return 0;
  }
  size_t at = 0;
  for (const StoredObjectHeader& e : fixture.expected) {
    StoredObjectHeader seen;
    std::memcpy(&seen, chunk.data() + at, sizeof seen);
    if (payload_checksum(chunk.data() + at + sizeof seen, e.payload_bytes) !=
        seen.payload_checksum) {
      return 0;  // RefusalReason::kChecksum
    }
    at += sizeof seen + e.payload_bytes;
  }
  return 0;
}
