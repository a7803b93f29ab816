// GPT-2's byte <-> Unicode mapping used by byte-level BPE vocabularies.
//
// Byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM2, ...) stores every token as a string of printable
// characters: bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand for themselves (as code points),
// the other 68 bytes map in order to U+0100, U+0101, ... (so a space 0x20 is "Ġ" U+0120 and a
// newline 0x0A is "Ċ" U+010A). Encoding maps each byte of the input to its character; decoding maps
// characters back to bytes.
//
//   std::string t = kvplan::bytes_to_unicode_text(" world");   // "Ġworld"
//   std::string b = kvplan::unicode_text_to_bytes("Ġworld");   // " world"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvplan {

// The code point that stands for `byte`.
[[nodiscard]] char32_t byte_to_code_point(uint8_t byte);

// The byte a code point stands for, or nullopt when it is not one of the 256 mapped characters.
[[nodiscard]] std::optional<uint8_t> code_point_to_byte(char32_t code_point);

// Each input byte replaced by the UTF-8 encoding of its mapped character.
[[nodiscard]] std::string bytes_to_unicode_text(std::string_view bytes);

// Inverse of bytes_to_unicode_text. A character outside the mapping is copied through unchanged
// (added tokens of byte-level vocabularies are stored as plain text).
[[nodiscard]] std::string unicode_text_to_bytes(std::string_view text);

}  // namespace kvplan
