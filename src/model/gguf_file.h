// GGUF reader (v2 and v3): metadata, tensor infos and tensor bytes of a memory-mapped file.
//
// Every count and offset is checked against the bytes left before it is trusted, so a truncated or
// corrupted file gives Error(kDataLoss/kOutOfRange) naming the file, the byte offset and the field
// (never a crash or an unbounded allocation). Layout per the GGUF spec: magic "GGUF", u32 version,
// u64 tensor count, u64 metadata count, metadata key/values, tensor infos, padding to
// `general.alignment` (default 32), then tensor data.
//
//   kvplan::GgufFile gguf("model.gguf");
//   std::string arch = gguf.get_string("general.architecture");
//   const kvplan::GgufTensorInfo& t = gguf.tensor("token_embd.weight");
//   std::span<const std::byte> raw = gguf.tensor_bytes(t);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "model/ggml_type.h"

namespace kvplan {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// One metadata value. Scalars are widened (integers to int64/uint64, floats to double); arrays keep
// their element type and hold their elements in `strings` or `numbers`.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint32;
  GgufValueType element_type = GgufValueType::kUint32;  // arrays only
  double number = 0;                                    // every numeric and bool scalar
  std::string text;                                     // strings
  std::vector<std::string> strings;                     // arrays of strings
  std::vector<double> numbers;                          // arrays of numbers/bools

  [[nodiscard]] bool is_array() const { return type == GgufValueType::kArray; }
  [[nodiscard]] bool is_numeric() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the innermost (contiguous) dimension
  uint32_t type_id = 0;
  const GgmlTypeInfo* type = nullptr;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

struct GgufReadOptions {
  // Only parse metadata (for `kvplan estimate`); tensor infos are skipped entirely.
  bool metadata_only = false;
};

class GgufFile {
 public:
  explicit GgufFile(const std::filesystem::path& path, const GgufReadOptions& options = {});
  // Parses bytes already in memory (the caller keeps them alive); `name` appears in errors.
  GgufFile(std::span<const std::byte> bytes, const std::filesystem::path& name,
           const GgufReadOptions& options = {});

  [[nodiscard]] const std::filesystem::path& path() const { return file_.path(); }
  [[nodiscard]] uint32_t version() const { return version_; }
  [[nodiscard]] uint64_t alignment() const { return alignment_; }
  [[nodiscard]] const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  [[nodiscard]] const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  [[nodiscard]] const GgufValue* find(const std::string& key) const;
  [[nodiscard]] bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed getters throw Error(kNotFound) for a missing key and kInvalidArgument for a wrong type,
  // naming the file and key.
  [[nodiscard]] std::string get_string(const std::string& key) const;
  [[nodiscard]] double get_number(const std::string& key) const;
  [[nodiscard]] uint64_t get_uint(const std::string& key) const;
  [[nodiscard]] std::optional<double> find_number(const std::string& key) const;
  [[nodiscard]] std::optional<std::string> find_string(const std::string& key) const;
  [[nodiscard]] const GgufValue& get_array(const std::string& key) const;

  [[nodiscard]] const GgufTensorInfo* find_tensor(const std::string& name) const;
  [[nodiscard]] const GgufTensorInfo& tensor(const std::string& name) const;
  [[nodiscard]] std::span<const std::byte> tensor_bytes(const GgufTensorInfo& info) const;

 private:
  GgufFile(MappedFile file, const GgufReadOptions& options);
  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace kvplan
