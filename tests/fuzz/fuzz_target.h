// What every fuzz target shares: the input as bytes or text, and the rule that kvplan::Error is the
// expected way for a parser to refuse bad input. Any other exception escapes the target, and
// libFuzzer (or the replay test) reports it as a finding, like a crash, a leak or an allocation
// over -malloc_limit_mb.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/error.h"

namespace kvplan::fuzz {

inline std::span<const std::byte> as_bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs one step of a target; a kvplan::Error means the input was refused, as it should be.
template <typename Step>
void refused_or_ok(Step&& step) {
  try {
    step();
  } catch (const Error&) {
  }
}

}  // namespace kvplan::fuzz
