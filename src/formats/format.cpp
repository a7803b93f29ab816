#include "formats/format.h"

#include <array>
#include <charconv>

#include "core/error.h"
#include "formats/kv_blocks.h"

namespace kvplan {
namespace {

struct Alias {
  std::string_view alias;
  FormatId id;
};
constexpr std::array<Alias, 6> kAliases = {{{"fp32", FormatId::kF32},
                                            {"fp16", FormatId::kF16},
                                            {"bfloat16", FormatId::kBF16},
                                            {"fp8", FormatId::kFp8E4M3},
                                            {"e4m3", FormatId::kFp8E4M3},
                                            {"e5m2", FormatId::kFp8E5M2}}};

}  // namespace

std::span<const KvFormatTraits> format_table() {
  return kKvFormatTable;
}

std::string format_names_for_help() {
  std::string names;
  for (const KvFormatTraits& info : kKvFormatTable) {
    names += info.name;
    names += ", ";
  }
  return names + "slot:N";
}

// Ids are below 256 (an id past it stops this table from compiling), so a table indexed by id
// answers in one load: attention asks for a format's traits for every tile it reads.
constexpr size_t kIdLimit = 256;
constexpr std::array<const KvFormatTraits*, kIdLimit> kTraitsById = [] {
  std::array<const KvFormatTraits*, kIdLimit> by_id{};
  for (const KvFormatTraits& info : kKvFormatTable) by_id.at(static_cast<size_t>(info.id)) = &info;
  return by_id;
}();

const KvFormatTraits& Format::info() const {
  if (id_ == FormatId::kSlot) return kSlotTraits;
  const auto index = static_cast<size_t>(id_);
  if (index < kIdLimit && kTraitsById[index] != nullptr) return *kTraitsById[index];
  fail(ErrorCode::kInternal, "format id {} has no catalogue entry", static_cast<int>(id_));
}

Format Format::from_id(uint16_t id, uint32_t slot_bytes) {
  if (id == static_cast<uint16_t>(FormatId::kSlot)) {
    if (slot_bytes == 0) fail(ErrorCode::kInvalidArgument, "format slot: size must be > 0 bytes");
    return Format(FormatId::kSlot, slot_bytes);
  }
  for (const KvFormatTraits& info : kKvFormatTable) {
    if (static_cast<uint16_t>(info.id) == id) return Format(info.id);
  }
  fail(ErrorCode::kInvalidArgument, "unknown format id {} (known: {})", id,
       format_names_for_help());
}

Format Format::parse(std::string_view text) {
  if (text.starts_with("slot:")) {
    const std::string_view digits = text.substr(5);
    uint32_t n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || n == 0 || n > (1u << 20)) {
      fail(ErrorCode::kInvalidArgument,
           "format '{}': expected slot:N with N bytes per token per KV head, 1..1048576", text);
    }
    return Format(FormatId::kSlot, n);
  }
  for (const KvFormatTraits& info : kKvFormatTable) {
    if (info.name == text) return Format(info.id);
  }
  for (const Alias& alias : kAliases) {
    if (alias.alias == text) return Format(alias.id);
  }
  fail(ErrorCode::kInvalidArgument, "unknown format '{}' (expected one of: {})", text,
       format_names_for_help());
}

std::string_view format_family_name(FormatFamily family) {
  switch (family) {
    case FormatFamily::kPlain:
      return "plain";
    case FormatFamily::kUniformInt:
      return "int";
    case FormatFamily::kGgml:
      return "ggml";
    case FormatFamily::kFp8:
      return "fp8";
    case FormatFamily::kMicroscaled:
      return "mx";
    case FormatFamily::kTurboQuant:
      return "turboquant";
    case FormatFamily::kRotatedInt:
      return "rotated int";
    case FormatFamily::kRowScaledInt:
      return "row-scaled int";
    case FormatFamily::kOpaqueSlot:
      return "slot";
  }
  return "unknown";
}

std::string Format::name() const {
  if (is_slot()) return "slot:" + std::to_string(slot_bytes_);
  return std::string(info().name);
}

double Format::nominal_bits(int head_dim) const {
  if (is_slot()) return 8.0 * slot_bytes_ / (2.0 * head_dim);
  return info().bits;
}

}  // namespace kvplan
