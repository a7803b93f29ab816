#include "core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kvplan {

std::string read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    fail(ErrorCode::kNotFound, "{}: file not found", path.string());
  }
  if (std::filesystem::is_directory(path, ec)) {
    fail(ErrorCode::kInvalidArgument, "{}: expected a file, found a directory", path.string());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kIo, "{}: cannot open: {}", path.string(), std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) fail(ErrorCode::kIo, "{}: read failed", path.string());
  return std::move(buffer).str();
}

namespace {

// Opens a temporary file next to `path` that no other writer uses: the pid separates processes,
// the counter separates threads (and calls) of this one, and O_EXCL refuses a name that exists —
// one left behind by a crashed process that had the same pid — so the next number is tried.
int create_unique_temp(const std::filesystem::path& path, std::string& tmp) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0;; ++attempt) {
    tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "." +
          std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST || attempt >= 1000) {
      fail(ErrorCode::kIo, "{}: cannot create: {}", tmp, std::strerror(errno));
    }
  }
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // no progress and no error: report it as one
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  std::string tmp;
  const int fd = create_unique_temp(path, tmp);
  int err = 0;
  if (!write_all(fd, bytes) || ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail(ErrorCode::kIo, "{}: write failed: {}", tmp, std::strerror(err));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    ::unlink(tmp.c_str());
    fail(ErrorCode::kIo, "{}: cannot rename into place: {}", path.string(), ec.message());
  }
}

}  // namespace kvplan
