// Writers of small GGUF and safetensors files for tests (built here from the format specs, so the
// readers are checked against independently produced bytes).
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvplan::test {

inline std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvplan_model_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// GGUF v3 per the spec: magic, version, tensor count, kv count, kvs, tensor infos, alignment
// padding (32), data.
class GgufWriter {
 public:
  void add_string(const std::string& key, const std::string& value) {
    key_(key);
    u32(8);
    str(value);
    ++n_kv_;
  }
  void add_u32(const std::string& key, uint32_t value) {
    key_(key);
    u32(4);
    u32(value);
    ++n_kv_;
  }
  void add_f32(const std::string& key, float value) {
    key_(key);
    u32(6);
    raw(&value, 4);
    ++n_kv_;
  }
  // Arrays: type 9, then the element type, the count (u64) and the elements.
  void add_u32_array(const std::string& key, const std::vector<uint32_t>& values) {
    key_(key);
    u32(9);
    u32(4);
    const uint64_t n = values.size();
    raw(&n, 8);
    for (uint32_t v : values) u32(v);
    ++n_kv_;
  }
  void add_bool_array(const std::string& key, const std::vector<bool>& values) {
    key_(key);
    u32(9);
    u32(7);
    const uint64_t n = values.size();
    raw(&n, 8);
    for (bool v : values) kv_ += static_cast<char>(v ? 1 : 0);
    ++n_kv_;
  }
  // dims in ggml order (dims[0] contiguous); `data` raw bytes of `type_id`.
  void add_tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type_id,
                  const std::string& data) {
    tensors_.push_back({name, std::move(dims), type_id, data});
  }
  void add_f32_tensor(const std::string& name, std::vector<uint64_t> dims,
                      const std::vector<float>& values) {
    add_tensor(name, std::move(dims), 0,
               std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  }

  [[nodiscard]] std::string bytes() const {
    std::string out = "GGUF";
    auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    const uint32_t version = 3;
    const uint64_t n_tensors = tensors_.size(), n_kv = n_kv_;
    put(&version, 4);
    put(&n_tensors, 8);
    put(&n_kv, 8);
    out += kv_;
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      const uint64_t len = t.name.size(), n_dims = t.dims.size();
      put(&len, 8);
      out += t.name;
      const uint32_t nd = static_cast<uint32_t>(n_dims);
      put(&nd, 4);
      for (uint64_t d : t.dims) put(&d, 8);
      put(&t.type, 4);
      put(&offset, 8);
      offset += (t.data.size() + 31) / 32 * 32;
    }
    out.resize((out.size() + 31) / 32 * 32, '\0');
    for (const auto& t : tensors_) {
      out += t.data;
      out.resize((out.size() + 31) / 32 * 32, '\0');
    }
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string data;
  };
  void raw(const void* p, size_t n) { kv_.append(static_cast<const char*>(p), n); }
  void u32(uint32_t v) { raw(&v, 4); }
  void str(const std::string& s) {
    const uint64_t n = s.size();
    raw(&n, 8);
    kv_ += s;
  }
  void key_(const std::string& k) { str(k); }
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

// One safetensors file: {"name": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}}.
struct SafetensorsEntry {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<float> values;  // written as F32
};

inline std::string safetensors_bytes(const std::vector<SafetensorsEntry>& entries) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& e : entries) {
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(e.values.data()), e.values.size() * 4);
    header[e.name] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {begin, data.size()}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const uint64_t n = text.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + text + data;
}

inline std::vector<float> random_values(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace kvplan::test
