// The optional disk tier: one file per chunk, "<dir>/<16 hex digits of the key>.kvchunk", holding
// the same records as the host tier ([header][payload] per transfer group). Files are written to
// "<name>.tmp.<pid>.<n>" and renamed into place, so a reader (this process or another) sees a whole
// object or none. The runtime keeps the index and capacity; this class only does file I/O.
//
//   kvplan::DiskTier disk("/var/cache/kvplan", {.fsync = true});
//   disk.write(key, bytes);  auto back = disk.read(key, expected_bytes);
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

namespace kvplan {

struct DiskTierOptions {
  bool fsync = true;  // fdatasync before rename: the file survives a crash once visible
};

class DiskTier {
 public:
  // Creates the directory if needed; Error(kIo) if it cannot.
  DiskTier(std::filesystem::path dir, const DiskTierOptions& options);

  [[nodiscard]] std::filesystem::path path_of(uint64_t key) const;
  // Throws Error(kIo) naming the file; a failed write leaves no file behind.
  void write(uint64_t key, std::span<const std::byte> bytes) const;
  // nullopt if the file does not exist; Error(kIo) if it exists but cannot be read. Reads at most
  // max_bytes + 1 bytes: a file in the cache directory may be anything (another program's, a
  // corrupt one), so a longer file comes back one byte too long — for the caller to refuse —
  // instead of being held in memory whole.
  [[nodiscard]] std::optional<std::vector<std::byte>> read(uint64_t key, size_t max_bytes) const;
  void remove(uint64_t key) const;
  // Keys of the chunk files already in the directory (a previous process's cache).
  [[nodiscard]] std::vector<uint64_t> scan() const;
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  DiskTierOptions options_;
};

}  // namespace kvplan
