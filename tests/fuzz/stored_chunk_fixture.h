// The runtime setting the stored-object fuzz target reads chunks under: a small mixed plan (three
// transfer groups of different formats, 16-token chunks), the identity a runtime would stamp, and
// the headers it expects — shared with the seed writer so the seeds are objects this runtime
// accepts.
#pragma once

#include <cstring>
#include <vector>

#include "plan/plan.h"
#include "plan/plan_fingerprint.h"
#include "runtime/plan_layout.h"
#include "runtime/stored_object.h"

namespace kvplan::fuzz {

inline constexpr uint64_t kChunkKey = 0x0123456789abcdefull;

inline Plan stored_chunk_plan() {
  Plan p;
  p.tool_version = "fuzz";
  p.created = "2026-01-01T00:00:00Z";
  p.model.name = "tiny";
  p.model.architecture = "llama";
  p.model.fingerprint = "00000000feedbeef";
  p.model.n_attention_heads = 2;
  p.model.geometry = KvGeometry::uniform("tiny", 4, 1, 32);
  p.quantization.block_size = 16;
  const char* pairs[] = {"KV16", "q4_0/q4_0", "K8V4", "q4_0/q4_0"};
  for (int l = 0; l < 4; ++l) p.layers.push_back({l, 0, KvPair::parse(pairs[l])});
  return p;
}

struct StoredChunkFixture {
  PlanLayout layout{stored_chunk_plan(), LayoutOptions{.chunk_tokens = 16}};
  ObjectIdentity identity{plan_fingerprint(stored_chunk_plan()), 0x5eed};
  std::vector<StoredObjectHeader> expected;  // per group, payload checksum 0

  StoredChunkFixture() {
    for (const TransferGroup& g : layout.groups()) {
      expected.push_back(make_object_header(identity, layout, g.index, 0, 0));
    }
  }

  // A stored chunk as the runtime writes it: every record sealed, payload bytes from `fill`.
  [[nodiscard]] std::vector<std::byte> write(uint8_t fill) const {
    std::vector<std::byte> out;
    for (const StoredObjectHeader& e : expected) {
      std::vector<std::byte> payload(e.payload_bytes, std::byte{fill});
      StoredObjectHeader h = e;
      h.chunk_key = kChunkKey;
      h.payload_checksum = payload_checksum(payload.data(), payload.size());
      seal_object_header(h);
      const auto* hb = reinterpret_cast<const std::byte*>(&h);
      out.insert(out.end(), hb, hb + sizeof h);
      out.insert(out.end(), payload.begin(), payload.end());
    }
    return out;
  }
};

}  // namespace kvplan::fuzz
