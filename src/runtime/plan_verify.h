// The check behind `kvplan verify`: random KV of a plan is packed into two chunks, written to the
// runtime's device pool and read back, stored so that one chunk stays on the pinned host tier and
// the other spills to the disk tier, evicted from the device, then loaded back and compared byte
// for byte. Every mismatch and refused load is credited to the tier the chunk came back from
// (found by lookup after the device copies are gone), and the disk tier counts only when the
// runtime's stats show it read the chunk's bytes from disk. Attention over the reloaded pages must
// equal attention over the device originals; the plan's quantization error vs exact KV is measured
// separately. The runtime's disk files live in a fresh scratch directory, removed on every exit.
//
//   kvplan::PlanVerifyOptions options;  options.chunk_tokens = 64;
//   kvplan::PlanVerifyResult r = kvplan::verify_plan(plan, options);
//   r.ok;  r.tier(kvplan::Tier::kDisk).mismatches;
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "runtime/offload_runtime.h"

namespace kvplan {

struct PlanVerifyOptions {
  size_t chunk_tokens = 0;  // 0: max(block_size, 64) rounded up to a block multiple
  uint64_t seed = 1;        // seeds the random KV, tokens and attention queries
  // Where the scratch directory for the disk tier is made; empty: the system temp directory.
  std::filesystem::path scratch_parent;
  // Runs after the chunks are stored and evicted from the device, just before they are loaded
  // back, with the chunks' keys in token order (tests corrupt or drop a tier's copy here).
  std::function<void(OffloadRuntime&, std::span<const uint64_t> keys)> before_reload;
};

// What passed through one tier: chunks stored there and loaded back (or refused on load), the
// chunk-image bytes compared after the round trip, the bytes that differed, and refused loads.
struct TierCheck {
  uint64_t chunks = 0;
  uint64_t bytes_compared = 0;
  uint64_t mismatches = 0;
  uint64_t refusals = 0;
};

struct LayerVerify {
  int layer = 0;
  int group = 0;
  std::string pair;
  size_t page_bytes = 0;
  uint64_t device_mismatches = 0;
  uint64_t host_mismatches = 0;
  uint64_t disk_mismatches = 0;
  // Absent for opaque slot layers (no values to attend over).
  std::optional<double> attention_device_vs_reloaded_max_abs_diff;
  double key_rel_error = 0;  // quantization vs exact KV, relative RMS, the worst chunk
  double value_rel_error = 0;
  double attention_rel_error = 0;
};

struct PlanVerifyResult {
  size_t chunk_tokens = 0;
  size_t chunk_bytes = 0;
  size_t transfer_groups = 0;
  std::string backend;
  std::array<TierCheck, 3> tiers;  // device, host, disk
  uint64_t disk_bytes_read = 0;    // the runtime's own count of bytes read from disk
  uint64_t guard_violations = 0;
  uint64_t refusals = 0;  // the runtime's count (every tier)
  std::vector<LayerVerify> layers;
  bool ok = false;

  [[nodiscard]] const TierCheck& tier(Tier t) const;
  // The tiers a chunk went through (compared or refused), in device, host, disk order.
  [[nodiscard]] std::vector<std::string> tiers_checked() const;
};

// Throws Error(kInvalidArgument) for a plan or chunk size the runtime rejects, Error(kInternal)
// when the runtime does not put the chunks where the check needs them or loses one.
PlanVerifyResult verify_plan(const Plan& plan, const PlanVerifyOptions& options);

}  // namespace kvplan
