#include "model/tokenizer/byte_unicode.h"

#include <array>

#include "model/tokenizer/utf8.h"

namespace kvplan {
namespace {

constexpr bool maps_to_itself(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<char32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_utf8{};
  // Every mapped code point is < 0x100 + 68.
  std::array<int16_t, 0x200> cp_to_byte{};

  ByteTables() {
    cp_to_byte.fill(-1);
    uint32_t next_extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const char32_t cp = maps_to_itself(b) ? char32_t{b} : char32_t{0x100 + next_extra++};
      byte_to_cp[b] = cp;
      append_utf8(byte_to_utf8[b], cp);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

char32_t byte_to_code_point(uint8_t byte) {
  return tables().byte_to_cp[byte];
}

std::optional<uint8_t> code_point_to_byte(char32_t cp) {
  if (cp >= tables().cp_to_byte.size() || tables().cp_to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().cp_to_byte[cp]);
}

std::string bytes_to_unicode_text(std::string_view bytes) {
  const ByteTables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.byte_to_utf8[static_cast<uint8_t>(c)];
  return out;
}

std::string unicode_text_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_char_length(text, i);
    const std::optional<uint8_t> b = len == 1 && static_cast<unsigned char>(text[i]) >= 0x80
                                         ? std::nullopt
                                         : code_point_to_byte(decode_utf8(text, i));
    if (b) {
      out.push_back(static_cast<char>(*b));
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace kvplan
