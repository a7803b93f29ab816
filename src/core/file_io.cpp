#include "core/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
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

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    fail(ErrorCode::kIo, "{}: cannot create: {}", tmp.string(), std::strerror(errno));
  }
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !flushed || !closed) {
    std::remove(tmp.c_str());
    fail(ErrorCode::kIo, "{}: write failed: {}", tmp.string(), std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(ErrorCode::kIo, "{}: cannot rename into place: {}", path.string(), ec.message());
  }
}

}  // namespace kvplan
