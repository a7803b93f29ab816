#include "runtime/stored_object.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_test_util.h"

namespace kvplan {
namespace {

struct Fixture {
  Plan plan = test::mixed_plan();
  PlanLayout layout{plan, {.chunk_tokens = 32}};
  ObjectIdentity id{0x1111, 0x2222};
};

TEST(StoredObject, HeaderIsFixedWidthLittleEndian) {
  Fixture f;
  const StoredObjectHeader h = make_object_header(f.id, f.layout, 1, 0xABCD, 0x42);
  unsigned char bytes[sizeof h];
  std::memcpy(bytes, &h, sizeof h);
  // Magic "KVCO" in file order, version 2, header size 128 — laid out by hand.
  EXPECT_EQ(std::string(reinterpret_cast<char*>(bytes), 4), "KVCO");
  EXPECT_EQ(bytes[4], 2);
  EXPECT_EQ(bytes[5], 0);
  EXPECT_EQ(bytes[6], 128);
  EXPECT_EQ(bytes[8], 0x11);
  EXPECT_EQ(bytes[16], 0x22);
  EXPECT_EQ(bytes[24], 0xCD);
  EXPECT_EQ(bytes[25], 0xAB);
  EXPECT_EQ(h.first_layer, 1u);
  EXPECT_EQ(h.n_runs, 2u);
  EXPECT_EQ(h.key_format_id, static_cast<uint16_t>(FormatId::kQ4_0));
  EXPECT_EQ(h.payload_bytes, f.layout.group(1).chunk_bytes);
  EXPECT_EQ(check_object_header(h, h), RefusalReason::kNone);
}

TEST(StoredObject, EveryMismatchHasItsReason) {
  Fixture f;
  const StoredObjectHeader good = make_object_header(f.id, f.layout, 1, 7, 0);
  auto refusal = [&](auto edit) {
    StoredObjectHeader h = good;
    edit(h);
    seal_object_header(h);
    return check_object_header(h, good);
  };
  EXPECT_EQ(refusal([](auto& h) { h.magic ^= 1; }), RefusalReason::kMagic);
  EXPECT_EQ(refusal([](auto& h) { h.header_version = 1; }), RefusalReason::kHeaderVersion);
  EXPECT_EQ(refusal([](auto& h) { h.plan_fingerprint ^= 1; }), RefusalReason::kPlan);
  EXPECT_EQ(refusal([](auto& h) { h.model_fingerprint ^= 1; }), RefusalReason::kModel);
  EXPECT_EQ(refusal([](auto& h) { h.chunk_key ^= 1; }), RefusalReason::kKey);
  EXPECT_EQ(refusal([](auto& h) { h.first_layer = 0; }), RefusalReason::kTransferGroup);
  EXPECT_EQ(refusal([](auto& h) { h.value_format_id = 3; }), RefusalReason::kFormat);
  EXPECT_EQ(refusal([](auto& h) { h.key_format_version += 1; }), RefusalReason::kFormatVersion);
  EXPECT_EQ(refusal([](auto& h) { h.head_dim = 128; }), RefusalReason::kGeometry);
  EXPECT_EQ(refusal([](auto& h) { h.run_stride_bytes += 1; }), RefusalReason::kGeometry);
  EXPECT_EQ(refusal([](auto& h) { h.payload_bytes += 1; }), RefusalReason::kPayloadBytes);
  // A flipped header byte without resealing: the header checksum catches it.
  StoredObjectHeader h = good;
  h.group_size ^= 4;
  EXPECT_EQ(check_object_header(h, good), RefusalReason::kHeaderChecksum);
}

TEST(StoredObject, ChecksumWhileCopyingEqualsChecksumAfter) {
  std::vector<std::byte> src(300000), dst(src.size());
  test::fill_pattern(src.data(), src.size(), 3);
  const uint64_t fused = copy_with_checksum(dst.data(), src.data(), src.size());
  EXPECT_EQ(fused, payload_checksum(src.data(), src.size()));
  EXPECT_EQ(dst, src);
  dst[123456] ^= std::byte{1};
  EXPECT_NE(payload_checksum(dst.data(), dst.size()), fused);
}

// A stored chunk as the runtime writes it: [header][payload] per group, sealed for `key`.
std::vector<std::byte> stored_chunk(const Fixture& f, uint64_t key) {
  std::vector<std::byte> out;
  for (const TransferGroup& g : f.layout.groups()) {
    StoredObjectHeader h = make_object_header(f.id, f.layout, g.index, key, 0);
    const auto* hb = reinterpret_cast<const std::byte*>(&h);
    out.insert(out.end(), hb, hb + sizeof h);
    out.resize(out.size() + g.chunk_bytes, std::byte{0x3c});
  }
  return out;
}

TEST(StoredObject, ChunkHeadersCheckedBeforeAnyPayloadIsTrusted) {
  Fixture f;
  std::vector<StoredObjectHeader> expected;
  for (const TransferGroup& g : f.layout.groups()) {
    expected.push_back(make_object_header(f.id, f.layout, g.index, 0, 0));
  }
  std::vector<std::byte> chunk = stored_chunk(f, 77);
  ASSERT_EQ(chunk.size(), stored_chunk_bytes(f.layout));
  EXPECT_EQ(check_stored_chunk_headers(chunk, expected, 77), RefusalReason::kNone);
  EXPECT_EQ(check_stored_chunk_headers(chunk, expected, 78), RefusalReason::kKey);
  // Sizes are checked before any header is read: a short or long file never reads out of bounds.
  EXPECT_EQ(check_stored_chunk_headers(std::span(chunk).first(chunk.size() - 1), expected, 77),
            RefusalReason::kTruncated);
  EXPECT_EQ(check_stored_chunk_headers({}, expected, 77), RefusalReason::kTruncated);
  chunk.push_back(std::byte{0});
  EXPECT_EQ(check_stored_chunk_headers(chunk, expected, 77), RefusalReason::kPayloadBytes);
  chunk.pop_back();
  // The last group's header is checked too, not only the first.
  const size_t last = chunk.size() - f.layout.groups().back().chunk_bytes - 128;
  chunk[last] = std::byte{0};
  EXPECT_EQ(check_stored_chunk_headers(chunk, expected, 77), RefusalReason::kMagic);
}
}  // namespace
}  // namespace kvplan
