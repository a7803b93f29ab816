// The optional disk tier: one file per chunk, holding the same records as the host tier ([header]
// [payload] per transfer group). Each (plan, model) pair has its own directory under the cache
// root, so runtimes serving different plans never adopt or evict each other's files:
//
//   <root>/<plan fingerprint, 16 hex>-<model fingerprint, 16 hex>/
//       lock                                  flock()ed by the one runtime using the directory
//       <16 hex digits of the key>.kvchunk    a chunk
//       <name>.kvchunk.tmp.<pid>.<n>          a write in flight (a crashed writer's are removed)
//
// Files are written to a temporary name, fdatasync'ed, renamed into place and the directory is
// fsync'ed (with fsync on), so a reader sees a whole object or none and a published file survives
// a crash. The runtime keeps the index and capacity; this class only does file I/O.
//
//   kvplan::DiskTier disk(kvplan::DiskTier::plan_directory("/var/cache/kvplan", plan_fp, model_fp),
//                         {.fsync = true, .io_hook = {}});
//   disk.write(key, bytes);  auto back = disk.read(key, expected_bytes);
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace kvplan {

// The steps of DiskTier::write, in order (kWrite once per write(2) call).
enum class DiskIoStep : uint8_t { kCreate, kWrite, kSyncFile, kRename, kSyncDirectory };
// Called before each step; a nonzero return fails that step with it as errno (fault injection for
// tests: a full disk is kWrite returning ENOSPC). Runs on the thread that writes.
using DiskIoHook = std::function<int(DiskIoStep step)>;

struct DiskTierOptions {
  // fdatasync before rename and fsync of the directory after it: the file survives a crash once
  // visible.
  bool fsync = true;
  DiskIoHook io_hook;  // empty: none
};

class DiskTier {
 public:
  // Creates the directory if needed and locks it (flock on <dir>/lock) for this object's lifetime.
  // Error(kIo) if it cannot; Error(kResourceExhausted) naming the lock file if another DiskTier
  // (in this process or another) holds it.
  DiskTier(std::filesystem::path dir, DiskTierOptions options);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // The directory of one (plan, model) pair's chunks under a cache root.
  static std::filesystem::path plan_directory(const std::filesystem::path& root,
                                              uint64_t plan_fingerprint,
                                              uint64_t model_fingerprint);

  [[nodiscard]] std::filesystem::path path_of(uint64_t key) const;
  // Throws Error(kIo) naming the file; a failed write leaves no file behind.
  void write(uint64_t key, std::span<const std::byte> bytes) const;
  // nullopt if the file does not exist; Error(kIo) if it exists but cannot be read. Reads at most
  // max_bytes + 1 bytes: a file in the cache directory may be anything (another program's, a
  // corrupt one), so a longer file comes back one byte too long — for the caller to refuse —
  // instead of being held in memory whole.
  [[nodiscard]] std::optional<std::vector<std::byte>> read(uint64_t key, size_t max_bytes) const;
  void remove(uint64_t key) const;
  // Keys of the chunk files already in the directory (a previous process's cache). Removes the
  // temporary files of writes that never finished: the lock says no one else is writing here.
  [[nodiscard]] std::vector<uint64_t> scan() const;
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  // errno to fail `step` with: the hook's answer, or 0.
  [[nodiscard]] int injected(DiskIoStep step) const;

  std::filesystem::path dir_;
  DiskTierOptions options_;
  int lock_fd_ = -1;  // holds the flock
  int dir_fd_ = -1;   // for fsync of the directory after a rename
};

}  // namespace kvplan
