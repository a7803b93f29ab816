#include "formats/format.h"

#include <array>
#include <charconv>

#include "core/error.h"
#include "formats/kv_blocks.h"

namespace kvplan {
namespace {

constexpr FormatInfo info_of(const KvFormatTraits& t) {
  const bool blocks = t.unit == RowUnit::kBlock || t.unit == RowUnit::kSplitBlock ||
                      t.unit == RowUnit::kRotatedBlocks || t.unit == RowUnit::kRotatedSpans;
  // A split block's scale byte sits after the row's codes but belongs to the block.
  const int block_bytes = t.unit == RowUnit::kSplitBlock ? t.unit_bytes + 1 : t.unit_bytes;
  return {static_cast<FormatId>(t.id),
          t.name,
          t.version,
          t.family,
          t.bits,
          blocks ? t.unit_values : 0,
          blocks ? block_bytes : 0,
          t.unit == RowUnit::kIntGroup ? t.unit_values : 0,
          t.meaning,
          t.per_channel_layout != 0,
          t.tensor_scale_range,
          codec_rotates_row(t.codec),
          t.default_candidate,
          t.engines,
          t.codec,
          t.unit == RowUnit::kRotatedSpans ? t.unit_values : 0};
}

constexpr auto kFormats = [] {
  std::array<FormatInfo, std::size(kKvFormatTable)> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = info_of(kKvFormatTable[i]);
  return out;
}();

constexpr FormatInfo kSlotInfo = {FormatId::kSlot,
                                  "slot",
                                  1,
                                  FormatFamily::kOpaqueSlot,
                                  0,
                                  0,
                                  0,
                                  0,
                                  "opaque engine slot: N bytes per token per KV head (K+V)"};

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

std::span<const FormatInfo> all_format_infos() {
  return kFormats;
}

std::string format_names_for_help() {
  std::string names;
  for (const FormatInfo& info : kFormats) {
    names += info.name;
    names += ", ";
  }
  return names + "slot:N";
}

const FormatInfo& Format::info() const {
  if (id_ == FormatId::kSlot) return kSlotInfo;
  for (const FormatInfo& info : kFormats) {
    if (info.id == id_) return info;
  }
  fail(ErrorCode::kInternal, "format id {} has no catalogue entry", static_cast<int>(id_));
}

Format Format::from_id(uint16_t id, uint32_t slot_bytes) {
  if (id == static_cast<uint16_t>(FormatId::kSlot)) {
    if (slot_bytes == 0) fail(ErrorCode::kInvalidArgument, "format slot: size must be > 0 bytes");
    return Format(FormatId::kSlot, slot_bytes);
  }
  for (const FormatInfo& info : kFormats) {
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
  for (const FormatInfo& info : kFormats) {
    if (info.name == text) return Format(info.id);
  }
  for (const Alias& alias : kAliases) {
    if (alias.alias == text) return Format(alias.id);
  }
  fail(ErrorCode::kInvalidArgument, "unknown format '{}' (expected one of: {})", text,
       format_names_for_help());
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
