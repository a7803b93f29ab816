#include "runtime/disk_tier.h"

#include <fcntl.h>
#include <sys/file.h>
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
constexpr std::string_view kTempMarker = ".kvchunk.tmp.";
constexpr std::string_view kLockName = "lock";

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

DiskTier::DiskTier(std::filesystem::path dir, DiskTierOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_)) {
    fail(ErrorCode::kIo, "disk tier {}: cannot create the directory: {}", dir_.string(),
         ec ? ec.message() : "not a directory");
  }
  const std::filesystem::path lock_path = dir_ / kLockName;
  Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0) {
    fail(ErrorCode::kIo, "disk tier: cannot open the lock file {}: {}", lock_path.string(),
         std::strerror(errno));
  }
  // flock, not fcntl locks: it belongs to this open file, so a second runtime in the same
  // process is refused too, and it goes away with the process however that ends.
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      fail(ErrorCode::kResourceExhausted,
           "disk tier {}: in use by another runtime for the same plan and model ({} is locked, "
           "by this process or another); give each running runtime its own disk directory",
           dir_.string(), lock_path.string());
    }
    fail(ErrorCode::kIo, "disk tier: cannot lock {}: {}", lock_path.string(), std::strerror(err));
  }
  Fd dir_fd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) {
    fail(ErrorCode::kIo, "disk tier: cannot open the directory {}: {}", dir_.string(),
         std::strerror(errno));
  }
  lock_fd_ = lock.release();
  dir_fd_ = dir_fd.release();
}

DiskTier::~DiskTier() {
  ::close(dir_fd_);
  ::close(lock_fd_);  // releases the flock
}

std::filesystem::path DiskTier::plan_directory(const std::filesystem::path& root,
                                               uint64_t plan_fingerprint,
                                               uint64_t model_fingerprint) {
  return root / (hash_hex(plan_fingerprint) + "-" + hash_hex(model_fingerprint));
}

int DiskTier::injected(DiskIoStep step) const {
  return options_.io_hook ? options_.io_hook(step) : 0;
}

std::filesystem::path DiskTier::path_of(uint64_t key) const {
  return dir_ / (hash_hex(key) + std::string(kSuffix));
}

void DiskTier::write(uint64_t key, std::span<const std::byte> bytes) const {
  const std::filesystem::path target = path_of(key);
  const std::string temp = target.string() + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(g_temp_counter.fetch_add(1));
  // Runs one step, or fails it with the hook's errno.
  auto step = [&](DiskIoStep s, auto&& call) -> decltype(call()) {
    if (const int err = injected(s)) {
      errno = err;
      return -1;
    }
    return call();
  };
  Fd fd(step(DiskIoStep::kCreate,
             [&] { return ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); }));
  if (fd.get() < 0) {
    fail(ErrorCode::kIo, "disk tier: cannot create {}: {}", temp, std::strerror(errno));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = step(DiskIoStep::kWrite, [&] {
      return ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    });
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::unlink(temp.c_str());
      fail(ErrorCode::kIo, "disk tier: writing {} failed at byte {}: {}", temp, done,
           std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (options_.fsync && step(DiskIoStep::kSyncFile, [&] { return ::fdatasync(fd.get()); }) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(ErrorCode::kIo, "disk tier: fdatasync {} failed: {}", temp, std::strerror(err));
  }
  if (::close(fd.release()) != 0 ||
      step(DiskIoStep::kRename, [&] { return ::rename(temp.c_str(), target.c_str()); }) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(ErrorCode::kIo, "disk tier: cannot publish {}: {}", target.string(), std::strerror(err));
  }
  // The rename is a change to the directory: without this the file can vanish in a crash after
  // the runtime counted it as landed.
  if (options_.fsync && step(DiskIoStep::kSyncDirectory, [&] { return ::fsync(dir_fd_); }) != 0) {
    const int err = errno;
    ::unlink(target.c_str());
    fail(ErrorCode::kIo, "disk tier: fsync of the directory {} after publishing {} failed: {}",
         dir_.string(), target.filename().string(), std::strerror(err));
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
    if (name.find(kTempMarker) != std::string::npos) {
      std::error_code ignored;  // best effort: a leftover that stays is only wasted space
      std::filesystem::remove(entry.path(), ignored);
      continue;
    }
    if (name.size() != 16 + kSuffix.size() || !name.ends_with(kSuffix)) continue;
    uint64_t key = 0;
    const auto [end, err] = std::from_chars(name.data(), name.data() + 16, key, 16);
    if (err == std::errc() && end == name.data() + 16) keys.push_back(key);
  }
  return keys;
}

}  // namespace kvplan
