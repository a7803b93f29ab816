// Hugging Face safetensors reader: one memory-mapped file, or a sharded set described by
// model.safetensors.index.json. Dtypes F32, F16 and BF16 (what HF checkpoints of the supported
// architectures use).
//
// File layout: u64 little-endian header length N, N bytes of JSON {"name": {"dtype", "shape",
// "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data; offsets are relative to the
// first byte after the header. Every length and offset is checked before it is trusted.
//
//   kvplan::SafetensorsSet set("models/SmolLM2-135M");   // a directory, a .safetensors or the
//   index const kvplan::SafetensorsTensor& t = set.tensor("model.norm.weight"); std::vector<float>
//   w = set.to_f32(t);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace kvplan {

enum class SafetensorsDtype { kF32, kF16, kBF16 };

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::string dtype_name;       // as written in the header ("F32", "F16", "BF16")
  std::vector<uint64_t> shape;  // row-major, shape[0] outermost (PyTorch order)
  std::span<const std::byte> bytes;
  const std::filesystem::path* file = nullptr;  // the shard holding it
  [[nodiscard]] uint64_t n_elements() const;
};

class SafetensorsFile {
 public:
  // Throws Error(kDataLoss/kOutOfRange/kInvalidArgument) naming the file, tensor and reason.
  explicit SafetensorsFile(const std::filesystem::path& path);
  // Parses bytes already in memory (the caller keeps them alive); `name` appears in errors.
  SafetensorsFile(std::span<const std::byte> bytes, const std::filesystem::path& name);
  [[nodiscard]] const std::filesystem::path& path() const { return file_.path(); }
  [[nodiscard]] const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }

 private:
  explicit SafetensorsFile(MappedFile file);
  MappedFile file_;
  std::filesystem::path path_;
  std::vector<SafetensorsTensor> tensors_;
};

class SafetensorsSet {
 public:
  // `path`: a .safetensors file, a model.safetensors.index.json, or a directory holding either.
  explicit SafetensorsSet(const std::filesystem::path& path);

  [[nodiscard]] const std::filesystem::path& source() const { return source_; }
  [[nodiscard]] const SafetensorsTensor* find(const std::string& name) const;
  // Throws Error(kNotFound) naming the source and tensor.
  [[nodiscard]] const SafetensorsTensor& tensor(const std::string& name) const;
  [[nodiscard]] std::vector<const SafetensorsTensor*> tensors() const;
  [[nodiscard]] std::vector<float> to_f32(const SafetensorsTensor& t) const;

 private:
  std::filesystem::path source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsTensor*> index_;
};

}  // namespace kvplan
