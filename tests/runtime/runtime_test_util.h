// Plans and byte patterns shared by the runtime tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "formats/kv_pair.h"
#include "plan/plan.h"

namespace kvplan::test {

// A small mixed plan: bf16 edge layers and packed middle layers, interleaved so that transfer
// groups are not contiguous ([bf16, q4_0, K8V4, q4_0, bf16]).
inline Plan mixed_plan(int n_kv_heads = 2, int head_dim = 64, size_t block_size = 16,
                       const std::string& fingerprint = "00000000feedbeef") {
  Plan p;
  p.tool_version = "test";
  p.created = "2026-01-01T00:00:00Z";
  p.model.name = "tiny";
  p.model.architecture = "llama";
  p.model.fingerprint = fingerprint;
  p.model.n_attention_heads = n_kv_heads * 2;
  p.model.geometry = KvGeometry::uniform("tiny", 5, n_kv_heads, head_dim);
  p.quantization.block_size = block_size;
  const char* pairs[] = {"KV16", "q4_0/q4_0", "K8V4", "q4_0/q4_0", "KV16"};
  for (int l = 0; l < 5; ++l) p.layers.push_back({l, 0, KvPair::parse(pairs[l]), {}});
  return p;
}

// mixed_plan with 3 KV heads and two per-KV-head layers: layer 1's heads take q8_0, q4_0, q8_0
// (three runs, the first and last of one page format) and layer 3's q4_0, q4_0, bf16 (two runs, the
// first of layer 1's middle format's pair over two heads).
inline Plan per_head_plan(int head_dim = 64, size_t block_size = 16) {
  Plan p = mixed_plan(3, head_dim, block_size);
  const KvPair q8 = KvPair::parse("q8_0/q8_0"), q4 = KvPair::parse("q4_0/q4_0"),
               bf16 = KvPair::parse("KV16");
  p.layers[1].heads = {q8, q4, q8};
  p.layers[3].heads = {q4, q4, bf16};
  for (const int l : {1, 3}) {
    p.layers[l].pair =
        widest_pair_of_heads(p.layers[l].heads, p.model.geometry.layers[l], p.quantization, l);
  }
  return p;
}

inline std::vector<uint32_t> random_tokens(std::mt19937_64& rng, size_t n) {
  std::vector<uint32_t> t(n);
  for (auto& x : t) x = static_cast<uint32_t>(rng() % 50000);
  return t;
}

// Deterministic bytes for a chunk key: any copy error shows as a mismatch.
inline void fill_pattern(std::byte* p, size_t n, uint64_t key) {
  uint64_t x = key * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<std::byte>(x >> 24);
  }
}

inline size_t count_pattern_mismatches(const std::byte* p, size_t n, uint64_t key) {
  std::vector<std::byte> want(n);
  fill_pattern(want.data(), n, key);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += p[i] != want[i];
  return bad;
}

}  // namespace kvplan::test
