#include "model/safetensors_file.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_text.h"
#include "formats/float_convert.h"

namespace kvplan {
namespace {

using nlohmann::json;

// A header larger than this is not a plausible safetensors file (HF's own limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

bool parse_dtype(const std::string& name, SafetensorsDtype* dtype, size_t* bytes) {
  if (name == "F32") {
    *dtype = SafetensorsDtype::kF32;
    *bytes = 4;
  } else if (name == "F16") {
    *dtype = SafetensorsDtype::kF16;
    *bytes = 2;
  } else if (name == "BF16") {
    *dtype = SafetensorsDtype::kBF16;
    *bytes = 2;
  } else {
    return false;
  }
  return true;
}

}  // namespace

uint64_t SafetensorsTensor::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : SafetensorsFile(MappedFile(path)) {}

SafetensorsFile::SafetensorsFile(std::span<const std::byte> bytes,
                                 const std::filesystem::path& name)
    : SafetensorsFile(MappedFile(bytes, name)) {}

SafetensorsFile::SafetensorsFile(MappedFile file) : file_(std::move(file)), path_(file_.path()) {
  const std::string name = path_.string();
  const std::span<const std::byte> all = file_.bytes();
  if (all.size() < 8) {
    fail(ErrorCode::kDataLoss,
         "{}: not a safetensors file: {} bytes is too short for the 8-byte "
         "header length",
         name, all.size());
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(all[i]);
  if (header_len > all.size() - 8 || header_len > kMaxHeaderBytes) {
    fail(ErrorCode::kOutOfRange,
         "{}: header length {} runs past the end of the file ({} bytes) "
         "or exceeds {} bytes",
         name, header_len, all.size(), kMaxHeaderBytes);
  }
  const std::string_view text(reinterpret_cast<const char*>(all.data() + 8), header_len);
  const json header = parse_json_text(text, name + ": header");
  if (!header.is_object()) {
    fail(ErrorCode::kDataLoss, "{}: the {}-byte header is not a JSON object", name, header_len);
  }
  const std::span<const std::byte> data = all.subspan(8 + header_len);
  for (const auto& item : header.items()) {
    // Named, not a structured binding: clang 14 (the fuzz build) cannot capture those in lambdas.
    const std::string& tensor_name = item.key();
    const json& entry = item.value();
    if (tensor_name == "__metadata__") continue;
    auto bad = [&](const std::string& reason) {
      fail(ErrorCode::kDataLoss, "{}: tensor '{}': {}", name, tensor_name, reason);
    };
    if (!entry.is_object()) bad("header entry is not an object");
    SafetensorsTensor t;
    t.name = tensor_name;
    t.file = &path_;
    const auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string()) bad("missing 'dtype'");
    t.dtype_name = dtype->get<std::string>();
    size_t elem_bytes = 0;
    if (!parse_dtype(t.dtype_name, &t.dtype, &elem_bytes)) {
      fail(ErrorCode::kUnimplemented, "{}: tensor '{}': dtype {} is not supported (F32, F16, BF16)",
           name, tensor_name, t.dtype_name);
    }
    const auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) bad("missing 'shape'");
    uint64_t n = 1;
    for (const json& d : *shape) {
      if (!d.is_number_unsigned())
        bad("shape " + json_excerpt(*shape) + " has a non-integer dimension");
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && n > (uint64_t{1} << 48) / v)
        bad("shape " + json_excerpt(*shape) + " is too large");
      n *= v;
      t.shape.push_back(v);
    }
    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
      bad("'data_offsets' must be [begin, end]");
    }
    const uint64_t begin = (*offsets)[0].get<uint64_t>();
    const uint64_t end = (*offsets)[1].get<uint64_t>();
    if (begin > end || end > data.size()) {
      bad(fmt::format("data_offsets [{}, {}] lie outside the {} data bytes", begin, end,
                      data.size()));
    }
    if (end - begin != n * elem_bytes) {
      bad(fmt::format("shape {} x {} ({} bytes) does not match the {} bytes of data_offsets",
                      json_excerpt(*shape), t.dtype_name, n * elem_bytes, end - begin));
    }
    t.bytes = data.subspan(begin, end - begin);
    tensors_.push_back(std::move(t));
  }
  // Two tensors may not share bytes (the format's own rule): sorted by start, each must end before
  // the next begins.
  std::vector<const SafetensorsTensor*> by_start;
  for (const SafetensorsTensor& t : tensors_) {
    if (!t.bytes.empty()) by_start.push_back(&t);
  }
  std::sort(by_start.begin(), by_start.end(),
            [](const auto* a, const auto* b) { return a->bytes.data() < b->bytes.data(); });
  for (size_t i = 1; i < by_start.size(); ++i) {
    const SafetensorsTensor& a = *by_start[i - 1];
    const SafetensorsTensor& b = *by_start[i];
    if (a.bytes.data() + a.bytes.size() > b.bytes.data()) {
      fail(ErrorCode::kDataLoss, "{}: tensors '{}' and '{}' overlap in the data section", name,
           a.name, b.name);
    }
  }
}

SafetensorsSet::SafetensorsSet(const std::filesystem::path& path) : source_(path) {
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path)) {
    if (std::filesystem::exists(path / "model.safetensors.index.json")) {
      file = path / "model.safetensors.index.json";
    } else if (std::filesystem::exists(path / "model.safetensors")) {
      file = path / "model.safetensors";
    } else {
      fail(ErrorCode::kNotFound, "{}: no model.safetensors or model.safetensors.index.json",
           path.string());
    }
  }
  std::vector<std::filesystem::path> shards;
  if (file.filename().string().ends_with(".index.json")) {
    const json index = parse_json_text(read_text_file(file), file.string());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail(ErrorCode::kInvalidArgument, "{}: expected a JSON object with a 'weight_map'",
           file.string());
    }
    std::map<std::string, bool> seen;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) {
        fail(ErrorCode::kInvalidArgument, "{}: weight_map['{}'] is not a file name", file.string(),
             tensor);
      }
      const std::string s = shard.get<std::string>();
      if (!seen[s]) {
        seen[s] = true;
        shards.push_back(file.parent_path() / s);
      }
    }
  } else {
    shards.push_back(file);
  }
  for (const auto& shard : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>(shard));
    for (const SafetensorsTensor& t : files_.back()->tensors()) {
      if (!index_.emplace(t.name, &t).second) {
        fail(ErrorCode::kDataLoss, "{}: tensor '{}' appears in more than one shard", shard.string(),
             t.name);
      }
    }
  }
}

const SafetensorsTensor* SafetensorsSet::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const SafetensorsTensor& SafetensorsSet::tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (t == nullptr)
    fail(ErrorCode::kNotFound, "{}: tensor '{}' is missing", source_.string(), name);
  return *t;
}

std::vector<const SafetensorsTensor*> SafetensorsSet::tensors() const {
  std::vector<const SafetensorsTensor*> out;
  for (const auto& [name, t] : index_) out.push_back(t);
  return out;
}

std::vector<float> SafetensorsSet::to_f32(const SafetensorsTensor& t) const {
  const size_t n = t.n_elements();
  std::vector<float> out(n);
  const auto* src = reinterpret_cast<const uint8_t*>(t.bytes.data());
  switch (t.dtype) {
    case SafetensorsDtype::kF32:
      std::memcpy(out.data(), src, n * 4);
      break;
    case SafetensorsDtype::kF16:
      for (size_t i = 0; i < n; ++i)
        out[i] = f16_to_f32(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      break;
    case SafetensorsDtype::kBF16:
      for (size_t i = 0; i < n; ++i)
        out[i] = bf16_to_f32(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      break;
  }
  return out;
}

}  // namespace kvplan
