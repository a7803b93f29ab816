// UTF-8 helpers shared by the tokenizers: sequence lengths and code point encoding.
//
// Invalid input is never an error here: a byte that does not start a well-formed sequence counts
// as a one-byte "character", so callers can still fall back to byte tokens for it.
//
//   for (size_t i = 0; i < text.size(); i += kvplan::utf8_char_length(text, i)) { ... }
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvplan {

// Length in bytes of the character starting at text[pos] (1..4); 1 for a malformed sequence.
[[nodiscard]] size_t utf8_char_length(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of `code_point` (must be <= 0x10FFFF).
void append_utf8(std::string& out, char32_t code_point);

// Decodes the character at text[pos]; returns U+FFFD for a malformed sequence.
[[nodiscard]] char32_t decode_utf8(std::string_view text, size_t pos);

}  // namespace kvplan
