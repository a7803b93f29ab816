#include "runtime/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/hash.h"

namespace kvplan {
namespace {

constexpr std::string_view kSuffix = ".kvchunk";

std::atomic<uint64_t> g_temp_counter{0};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

DiskTier::DiskTier(std::filesystem::path dir, const DiskTierOptions& options)
    : dir_(std::move(dir)), options_(options) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_)) {
    fail(ErrorCode::kIo, "disk tier {}: cannot create the directory: {}", dir_.string(),
         ec ? ec.message() : "not a directory");
  }
}

std::filesystem::path DiskTier::path_of(uint64_t key) const {
  return dir_ / (hash_hex(key) + std::string(kSuffix));
}

void DiskTier::write(uint64_t key, std::span<const std::byte> bytes) const {
  const std::filesystem::path target = path_of(key);
  const std::string temp = target.string() + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(g_temp_counter.fetch_add(1));
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    fail(ErrorCode::kIo, "disk tier: cannot create {}: {}", temp, std::strerror(errno));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::unlink(temp.c_str());
      fail(ErrorCode::kIo, "disk tier: writing {} failed at byte {}: {}", temp, done,
           std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (options_.fsync && ::fdatasync(fd.get()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(ErrorCode::kIo, "disk tier: fdatasync {} failed: {}", temp, std::strerror(err));
  }
  if (::close(fd.release()) != 0 || ::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(ErrorCode::kIo, "disk tier: cannot publish {}: {}", target.string(), std::strerror(err));
  }
}

std::optional<std::vector<std::byte>> DiskTier::read(uint64_t key, size_t max_bytes) const {
  const std::filesystem::path path = path_of(key);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail(ErrorCode::kIo, "disk tier: cannot open {}: {}", path.string(), std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    fail(ErrorCode::kIo, "disk tier: cannot stat {}: {}", path.string(), std::strerror(errno));
  }
  const size_t limit = max_bytes < SIZE_MAX ? max_bytes + 1 : max_bytes;
  std::vector<std::byte> bytes(std::min(static_cast<size_t>(st.st_size), limit));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fail(ErrorCode::kIo, "disk tier: reading {} failed at byte {}: {}", path.string(), done,
           std::strerror(errno));
    }
    if (n == 0) break;  // shorter than fstat said: the validator reports it as truncated
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

void DiskTier::remove(uint64_t key) const {
  ::unlink(path_of(key).c_str());
}

std::vector<uint64_t> DiskTier::scan() const {
  std::vector<uint64_t> keys;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 16 + kSuffix.size() || !name.ends_with(kSuffix)) continue;
    uint64_t key = 0;
    const auto [end, err] = std::from_chars(name.data(), name.data() + 16, key, 16);
    if (err == std::errc() && end == name.data() + 16) keys.push_back(key);
  }
  return keys;
}

}  // namespace kvplan
