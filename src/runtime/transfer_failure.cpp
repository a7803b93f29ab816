// How OffloadRuntime reports a failed transfer: counted, logged at doubling intervals, and
// returned as the operation's status, so the runtime goes on serving.
#include "runtime/offload_runtime_impl.h"

#include <mutex>

#include <spdlog/spdlog.h>

#include "core/hash.h"

namespace kvplan {

TransferStatus OffloadRuntime::Impl::transfer_failure_locked(std::string_view what, uint64_t key,
                                                             const Error& err) {
  const uint64_t n = ++counters.transfer_errors;
  if (worth_logging(n)) {
    spdlog::warn("{} of chunk {} failed ({} transfer errors so far): {}", what, hash_hex(key), n,
                 err.what());
  }
  return status_error(err.code(),
                      fmt::format("{} of chunk {}: {}", what, hash_hex(key), err.what()));
}

TransferStatus OffloadRuntime::Impl::unexpected_failure(std::string_view what,
                                                        const std::exception& err) {
  std::lock_guard<std::mutex> lock(mu);
  ++counters.transfer_errors;
  spdlog::error("{} failed unexpectedly: {}", what, err.what());
  return status_error(ErrorCode::kInternal, fmt::format("{} failed: {}", what, err.what()));
}

}  // namespace kvplan
