#include "formats/kv_pair.h"

#include <optional>

#include "core/error.h"

namespace kvplan {
namespace {

// KVTuner's names: "KV8" and "K8V4" name bf16 and the int formats by their bits.
std::optional<Format> format_for_bits(std::string_view digits) {
  const FormatId id = format_of_spelling(kEngineHf, digits.data(), digits.size());
  if (id == FormatId::kSlot) return std::nullopt;
  return Format(id);
}

std::optional<int> bits_name(Format f) {
  if (f.is_slot()) return std::nullopt;
  const char* bits = engine_spelling(kEngineHf, f.id());
  if (bits == nullptr) return std::nullopt;
  return std::stoi(bits);
}

[[noreturn]] void bad_pair(std::string_view text) {
  fail(ErrorCode::kInvalidArgument,
       "unknown KV pair '{}' (expected KVn or KnVm with n,m in 16/8/4/2 such as KV8, K8V4, K4V2; "
       "KEY/VALUE with format names such as q8_0/q4_0; or slot:N)",
       text);
}

}  // namespace

KvPair KvPair::parse(std::string_view text) {
  if (text.starts_with("slot:")) return uniform(Format::parse(text));
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    const Format key = Format::parse(text.substr(0, slash));
    const Format value = Format::parse(text.substr(slash + 1));
    if (key.is_slot() || value.is_slot()) {
      fail(ErrorCode::kInvalidArgument,
           "KV pair '{}': a slot holds K and V together; write it alone as slot:N", text);
    }
    return {key, value};
  }
  if (text.starts_with("KV")) {
    if (auto f = format_for_bits(text.substr(2))) return uniform(*f);
    bad_pair(text);
  }
  if (text.starts_with("K")) {
    const size_t v = text.find('V');
    if (v == std::string_view::npos) bad_pair(text);
    const auto key = format_for_bits(text.substr(1, v - 1));
    const auto value = format_for_bits(text.substr(v + 1));
    if (!key || !value) bad_pair(text);
    return {*key, *value};
  }
  bad_pair(text);
}

std::string KvPair::name() const {
  if (is_slot()) return key.name();
  const auto k = bits_name(key);
  const auto v = bits_name(value);
  if (k && v) {
    if (*k == *v) return "KV" + std::to_string(*k);
    return "K" + std::to_string(*k) + "V" + std::to_string(*v);
  }
  return key.name() + "/" + value.name();
}

double KvPair::nominal_bits(int head_dim) const {
  if (is_slot()) return key.nominal_bits(head_dim);
  return (key.nominal_bits(head_dim) + value.nominal_bits(head_dim)) / 2.0;
}

}  // namespace kvplan
