// A read-only memory map of a whole file (model weights are mapped, never copied wholesale), or a
// view of bytes already in memory that the same parsers read.
//
//   kvplan::MappedFile file("model.gguf");
//   std::span<const std::byte> bytes = file.bytes();
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace kvplan {

class MappedFile {
 public:
  // Throws Error(kNotFound) for a missing file, kIo if it cannot be mapped.
  explicit MappedFile(const std::filesystem::path& path);
  // Views bytes the caller owns and keeps alive (in-memory input: tests, fuzz targets); `name`
  // stands in for the path in error messages. Nothing is unmapped.
  MappedFile(std::span<const std::byte> bytes, std::filesystem::path name);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  [[nodiscard]] std::span<const std::byte> bytes() const { return {data_, size_}; }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  void release();
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = true;  // data_ is our mapping
};

}  // namespace kvplan
