// KV-cache formats: stable ids, names, versions and nominal bits — the catalogue every other module
// (plans, profiles, the runtime's stored objects) refers to. Byte layouts are in
// kernels/kv_blocks.h, sizes in format_size.h, pack/unpack in pack.h.
//
//   kvplan::Format f = kvplan::Format::parse("q4_0");   // or "int4", "fp8_e4m3", "slot:134"
//   f.name();          // "q4_0"
//   f.info().version;  // written into plans and stored objects
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvplan {

// Numeric ids are written into plans and stored objects: never renumber, only append.
enum class FormatId : uint16_t {
  kF32 = 1,
  kF16 = 2,
  kBF16 = 3,
  kInt8 = 16,
  kInt4 = 17,
  kInt2 = 18,
  kInt8G64 = 19,  // the int formats with a fixed group instead of the plan's group_size
  kInt8G128 = 20,
  kInt4G64 = 21,
  kInt4G128 = 22,
  kInt2G64 = 23,
  kInt2G128 = 24,
  kInt8Kivi = 25,  // KIVI keys: the int formats per channel over groups of group_size tokens
  kInt4Kivi = 26,
  kInt2Kivi = 27,
  kQ8_0 = 32,
  kQ4_0 = 33,
  kQ4_1 = 34,
  kQ5_0 = 35,
  kQ5_1 = 36,
  kIq4Nl = 37,
  kFp8E4M3 = 48,
  kFp8E5M2 = 49,
  kSlot = 64,  // opaque engine slot: N bytes per token per KV head for K and V together
};

enum class FormatFamily {
  kPlain,       // f32 / f16 / bf16
  kUniformInt,  // int8 / int4 / int2: asymmetric min/max groups, f16 scale + zero
  kGgmlBlock,   // llama.cpp blocks of 32
  kFp8,         // OCP FP8 with a per-(layer, head) f32 scale kept outside the row
  kOpaqueSlot,  // bytes kvplan stores and moves but never interprets
};

struct FormatInfo {
  FormatId id;
  std::string_view name;
  uint16_t version;
  FormatFamily family;
  int bits;          // nominal bits per value (0 for slots: depends on N and head_dim)
  int block_values;  // values per ggml block (32), 0 for other families
  int block_bytes;   // bytes per ggml block, 0 for other families
  int group;         // uniform int: fixed group size (0 = the plan's group_size); 0 otherwise
  std::string_view meaning;
  // KIVI key format: each channel packed over groups of the plan's group_size tokens, with the
  // layout of the int format of the same bits; values refuse it, and the layer keeps KIVI's
  // full-precision residual window (formats/quant_settings.h, layer_runs_kivi).
  bool per_channel_keys = false;
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
