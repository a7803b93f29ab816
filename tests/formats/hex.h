// Bytes as lowercase hex, the form the golden files store them in.
#pragma once

#include <cstdint>
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

}  // namespace kvplan::test
