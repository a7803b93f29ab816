// Bytes as lowercase hex and floats as f32 bit patterns: the forms the golden files store them in.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvplan::test {

inline std::string to_hex(const std::vector<uint8_t>& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (const uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

inline std::vector<float> floats_from_bits(const std::vector<uint32_t>& bits) {
  std::vector<float> out(bits.size());
  std::memcpy(out.data(), bits.data(), bits.size() * sizeof(float));
  return out;
}

}  // namespace kvplan::test
