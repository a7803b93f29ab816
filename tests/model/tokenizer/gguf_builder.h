// Writes small synthetic GGUF files (metadata only, no tensors) for tokenizer tests, byte by byte
// per the GGUF spec: magic "GGUF", u32 version 3, u64 tensor count 0, u64 metadata count, then
// key (u64 length + bytes), u32 value type, value; arrays are u32 element type + u64 count.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace kvplan::test {

class GgufBuilder {
 public:
  GgufBuilder& add_string(const std::string& key, const std::string& value) {
    begin(key, kString);
    put_string(value);
    return *this;
  }
  GgufBuilder& add_u32(const std::string& key, uint32_t value) {
    begin(key, kUint32);
    put(value);
    return *this;
  }
  GgufBuilder& add_i32(const std::string& key, int32_t value) {
    begin(key, kInt32);
    put(value);
    return *this;
  }
  GgufBuilder& add_bool(const std::string& key, bool value) {
    begin(key, kBool);
    put(static_cast<uint8_t>(value ? 1 : 0));
    return *this;
  }
  GgufBuilder& add_strings(const std::string& key, const std::vector<std::string>& values) {
    begin_array(key, kString, values.size());
    for (const std::string& v : values) put_string(v);
    return *this;
  }
  GgufBuilder& add_f32s(const std::string& key, const std::vector<float>& values) {
    begin_array(key, kFloat32, values.size());
    for (float v : values) put(v);
    return *this;
  }
  GgufBuilder& add_i32s(const std::string& key, const std::vector<int32_t>& values) {
    begin_array(key, kInt32, values.size());
    for (int32_t v : values) put(v);
    return *this;
  }

  void write(const std::filesystem::path& path) const {
    std::vector<char> out;
    auto raw = [&](const void* p, size_t n) {
      const char* c = static_cast<const char*>(p);
      out.insert(out.end(), c, c + n);
    };
    raw("GGUF", 4);
    const uint32_t version = 3;
    const uint64_t n_tensors = 0;
    raw(&version, 4);
    raw(&n_tensors, 8);
    raw(&n_kv_, 8);
    out.insert(out.end(), body_.begin(), body_.end());
    while (out.size() % 32 != 0) out.push_back(0);
    std::ofstream f(path, std::ios::binary);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
  }

 private:
  static constexpr uint32_t kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7, kString = 8,
                            kArray = 9;
  template <typename T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    body_.insert(body_.end(), b, b + sizeof(T));
  }
  void put_string(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    body_.insert(body_.end(), s.begin(), s.end());
  }
  void begin(const std::string& key, uint32_t type) {
    ++n_kv_;
    put_string(key);
    put(type);
  }
  void begin_array(const std::string& key, uint32_t element_type, size_t n) {
    begin(key, kArray);
    put(element_type);
    put(static_cast<uint64_t>(n));
  }

  std::vector<char> body_;
  uint64_t n_kv_ = 0;
};

// A fresh directory under the system temp dir for one test.
inline std::filesystem::path make_temp_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("kvplan_tokenizer_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kvplan::test
