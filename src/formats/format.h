// KV-cache formats: stable ids, names, versions and nominal bits — the catalogue every other module
// (plans, profiles, the runtime's stored objects) refers to. Byte layouts are in
// src/formats/kv_blocks.h, sizes in format_size.h, pack/unpack in pack.h.
//
//   kvplan::Format f = kvplan::Format::parse("q4_0");   // or "int4", "fp8_e4m3", "slot:134"
//   f.name();          // "q4_0"
//   f.info().version;  // written into plans and stored objects
#pragma once

#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "formats/kv_format_table.h"

namespace kvplan {

// Every concrete format (slot excluded), in table order.
std::span<const KvFormatTraits> format_table();

class Format {
 public:
  constexpr Format() = default;
  constexpr explicit Format(FormatId id, uint32_t slot_bytes = 0)
      : id_(id), slot_bytes_(slot_bytes) {}

  // Accepts every catalogue name ("f16", "int4", "q4_0", "iq4_nl", "fp8_e4m3", ...), a few common
  // aliases ("fp16", "bfloat16", "fp8" = fp8_e4m3) and "slot:N". Throws Error(kInvalidArgument)
  // naming the text and listing the valid names.
  static Format parse(std::string_view text);
  static Format from_id(uint16_t id, uint32_t slot_bytes = 0);

  [[nodiscard]] constexpr FormatId id() const { return id_; }
  [[nodiscard]] constexpr uint32_t slot_bytes() const { return slot_bytes_; }
  [[nodiscard]] constexpr bool is_slot() const { return id_ == FormatId::kSlot; }
  // Its line of the registry (formats/kv_format_table.h); kSlotTraits for a slot.
  [[nodiscard]] const KvFormatTraits& info() const;
  [[nodiscard]] FormatFamily family() const { return info().family; }
  // True for formats that keep an f32 scale per (layer, KV head) outside the row (FP8, NVFP4).
  [[nodiscard]] bool has_tensor_scale() const { return info().has_tensor_scale(); }
  [[nodiscard]] std::string name() const;
  // Bits per value before overheads (KVTuner's "equivalent bits"); for a slot, 8*N over the 2*D
  // values of one token's K and V.
  [[nodiscard]] double nominal_bits(int head_dim) const;

  constexpr bool operator==(const Format&) const = default;
  constexpr auto operator<=>(const Format&) const = default;

 private:
  FormatId id_ = FormatId::kF16;
  uint32_t slot_bytes_ = 0;
};

// The list of valid names, for error messages and --help.
std::string format_names_for_help();

// A family's short name: "plain", "int", "ggml", "fp8", "mx", "turboquant", "rotated int",
// "row-scaled int", "slot".
std::string_view format_family_name(FormatFamily family);

}  // namespace kvplan
