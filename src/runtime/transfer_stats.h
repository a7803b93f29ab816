// Counters of the offload runtime and a least-squares fit of transfer time against size,
// t = t0 + B / beta, per direction (t0: fixed cost per transfer, beta: bandwidth in bytes/s).
//
//   kvplan::LinearTransferFit fit;  fit.add(bytes, seconds);  fit.result().bytes_per_second;
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "runtime/stored_object.h"

namespace kvplan {

struct TransferFitResult {
  uint64_t transfers = 0;
  double total_bytes = 0;
  double total_seconds = 0;
  double t0_seconds = 0;        // intercept, >= 0; 0 when fewer than 2 distinct sizes were seen
  double bytes_per_second = 0;  // 1 / slope; total_bytes / total_seconds when sizes never varied
};

// Sums for least squares of seconds on bytes, the intercept constrained to t0 >= 0.
class LinearTransferFit {
 public:
  void add(double bytes, double seconds);
  [[nodiscard]] TransferFitResult result() const;

 private:
  uint64_t n_ = 0;
  double sb_ = 0, st_ = 0, sbb_ = 0, sbt_ = 0;
};

struct RuntimeStats {
  uint64_t bytes_device_to_host = 0;
  uint64_t bytes_host_to_device = 0;
  uint64_t bytes_to_disk = 0;
  uint64_t bytes_from_disk = 0;
  uint64_t stores_ok = 0;
  uint64_t stores_failed = 0;
  uint64_t stores_deduplicated = 0;  // chunk already held by the host or disk tier
  uint64_t loads_chunks = 0;         // chunks handed to callers by load()
  uint64_t lookups = 0;
  uint64_t hits_device = 0;  // chunks of looked-up prefixes, by the tier holding them
  uint64_t hits_host = 0;
  uint64_t hits_disk = 0;
  uint64_t misses = 0;             // lookups whose prefix ended before the tokens did
  uint64_t recomputed_tokens = 0;  // tokens after the cached prefix (partial tails included)
  uint64_t evictions_device = 0;
  uint64_t evictions_host = 0;  // for room (spills_landed + spills_dropped) and by evict()
  uint64_t evictions_disk = 0;
  // Host-tier evictions for room, by where the chunk went: to disk (written now, or already
  // there), or nowhere — no disk tier, every disk file pinned or being read, or the write failed.
  uint64_t spills_landed = 0;
  uint64_t spills_dropped = 0;
  uint64_t spill_write_failures = 0;  // of spills_dropped: disk writes that failed (logged)
  // Copies or fence waits the backend failed (a GPU error): the store or load failed with that
  // error and the runtime went on.
  uint64_t transfer_errors = 0;
  uint64_t refusals = 0;
  std::array<uint64_t, kRefusalReasonCount> refusals_by_reason{};
  TransferFitResult device_to_host;  // one sample per transfer group copied
  TransferFitResult host_to_device;
  TransferFitResult disk_write;  // one sample per chunk file
  TransferFitResult disk_read;
};

}  // namespace kvplan
