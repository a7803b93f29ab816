// KV-cache formats: stable ids, names, versions and nominal bits — the catalogue every other module
// (plans, profiles, the runtime's stored objects) refers to. Byte layouts are in
// src/formats/kv_blocks.h, sizes in format_size.h, pack/unpack in pack.h.
//
//   kvplan::Format f = kvplan::Format::parse("q4_0");   // or "int4", "fp8_e4m3", "slot:134"
//   f.name();          // "q4_0"
//   f.info().version;  // written into plans and stored objects
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "formats/kv_format_table.h"

namespace kvplan {

// One enumerator per line of the format table (src/formats/kv_format_table.h: kF16, kQ4_0, ...), plus
// the opaque slot. Numeric ids are written into plans and stored objects.
#define KVPLAN_FORMAT_ENUMERATOR(e, id, ...) k##e = id,
enum class FormatId : uint16_t {
  KVPLAN_KV_FORMATS(KVPLAN_FORMAT_ENUMERATOR)  //
  kSlot = 64,  // opaque engine slot: N bytes per token per KV head for K and V together
};
#undef KVPLAN_FORMAT_ENUMERATOR

// A format's catalogue entry: its line of the format table, with host types.
struct FormatInfo {
  FormatId id;
  std::string_view name;
  uint16_t version;
  FormatFamily family;
  int bits;          // nominal bits per value (0 for slots: depends on N and head_dim)
  int block_values;  // values per block (ggml, MX, NVFP4), 0 for other families
  int block_bytes;   // bytes per block, scale included, 0 for other families
  int group;         // uniform int: fixed group size (0 = the plan's group_size); 0 otherwise
  std::string_view meaning;
  // KIVI key format: each channel packed over groups of the plan's group_size tokens, with the
  // layout of the int format of the same bits; values refuse it, and the layer keeps KIVI's
  // full-precision residual window (formats/quant_settings.h, layer_runs_kivi).
  bool per_channel_keys = false;
  // > 0: an f32 scale per (layer, KV head) kept outside the row, calibrated as
  // absmax / tensor_scale_range (FP8: the largest finite value; NVFP4: 6 x 448).
  float tensor_scale_range = 0.0f;
  // Packs the Hadamard-rotated row (head_dim a power of two, <= 512) or its spans (rotation_span).
  bool rotated = false;
  bool default_candidate = false;  // searched when no --formats are given
  uint32_t engines = 0;            // kEngine* bits (src/formats/kv_format_table.h)
  Codec codec = Codec::kNone;
  // Rotated formats: the values rotated together, 0 for the whole row (q4_0_had), else each span
  // of that many values on its own (q4_0_had64: llama.cpp's V rotation); its block_values too.
  int rotation_span = 0;
};

// Every concrete format (slot excluded), in catalogue order.
std::span<const FormatInfo> all_format_infos();

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
  [[nodiscard]] const FormatInfo& info() const;
  [[nodiscard]] FormatFamily family() const { return info().family; }
  // True for formats that keep an f32 scale per (layer, KV head) outside the row (FP8, NVFP4).
  [[nodiscard]] bool has_tensor_scale() const { return info().tensor_scale_range > 0.0f; }
  [[nodiscard]] std::string name() const;
  // Bits per value before overheads (KVTuner's "equivalent bits"); for a slot, 8*N over the 2*D
  // values of one token's K and V.
  [[nodiscard]] double nominal_bits(int head_dim) const;

  constexpr bool operator==(const Format&) const = default;

 private:
  FormatId id_ = FormatId::kF16;
  uint32_t slot_bytes_ = 0;
};

// The list of valid names, for error messages and --help.
std::string format_names_for_help();

}  // namespace kvplan
