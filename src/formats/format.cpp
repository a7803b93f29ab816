#include "formats/format.h"

#include <array>
#include <charconv>

#include "core/error.h"
#include "kernels/kv_blocks.h"

namespace kvplan {
namespace {

constexpr std::array<FormatInfo, 23> kFormats = {{
    {FormatId::kF32, "f32", 1, FormatFamily::kPlain, 32, 0, 0, 0, "IEEE float32"},
    {FormatId::kF16, "f16", 1, FormatFamily::kPlain, 16, 0, 0, 0, "IEEE float16"},
    {FormatId::kBF16, "bf16", 1, FormatFamily::kPlain, 16, 0, 0, 0, "bfloat16"},
    {FormatId::kInt8, "int8", 1, FormatFamily::kUniformInt, 8, 0, 0, 0,
     "asymmetric 8-bit, f16 scale+zero per group"},
    {FormatId::kInt4, "int4", 1, FormatFamily::kUniformInt, 4, 0, 0, 0,
     "asymmetric 4-bit, f16 scale+zero per group"},
    {FormatId::kInt2, "int2", 1, FormatFamily::kUniformInt, 2, 0, 0, 0,
     "asymmetric 2-bit, f16 scale+zero per group"},
    {FormatId::kInt8G64, "int8_g64", 1, FormatFamily::kUniformInt, 8, 0, 0, 64,
     "asymmetric 8-bit, f16 scale+zero per 64 values"},
    {FormatId::kInt8G128, "int8_g128", 1, FormatFamily::kUniformInt, 8, 0, 0, 128,
     "asymmetric 8-bit, f16 scale+zero per 128 values"},
    {FormatId::kInt4G64, "int4_g64", 1, FormatFamily::kUniformInt, 4, 0, 0, 64,
     "asymmetric 4-bit, f16 scale+zero per 64 values"},
    {FormatId::kInt4G128, "int4_g128", 1, FormatFamily::kUniformInt, 4, 0, 0, 128,
     "asymmetric 4-bit, f16 scale+zero per 128 values"},
    {FormatId::kInt2G64, "int2_g64", 1, FormatFamily::kUniformInt, 2, 0, 0, 64,
     "asymmetric 2-bit, f16 scale+zero per 64 values"},
    {FormatId::kInt2G128, "int2_g128", 1, FormatFamily::kUniformInt, 2, 0, 0, 128,
     "asymmetric 2-bit, f16 scale+zero per 128 values"},
    {FormatId::kInt8Kivi, "int8_kivi", 1, FormatFamily::kUniformInt, 8, 0, 0, 0,
     "keys only: int8 per channel over group_size tokens (KIVI), newest tokens bf16", true},
    {FormatId::kInt4Kivi, "int4_kivi", 1, FormatFamily::kUniformInt, 4, 0, 0, 0,
     "keys only: int4 per channel over group_size tokens (KIVI), newest tokens bf16", true},
    {FormatId::kInt2Kivi, "int2_kivi", 1, FormatFamily::kUniformInt, 2, 0, 0, 0,
     "keys only: int2 per channel over group_size tokens (KIVI), newest tokens bf16", true},
    {FormatId::kQ8_0, "q8_0", 1, FormatFamily::kGgmlBlock, 8, kGgmlBlock, sizeof(BlockQ8_0), 0,
     "llama.cpp q8_0 (symmetric 8-bit, f16 scale per 32)"},
    {FormatId::kQ4_0, "q4_0", 1, FormatFamily::kGgmlBlock, 4, kGgmlBlock, sizeof(BlockQ4_0), 0,
     "llama.cpp q4_0 (symmetric 4-bit, f16 scale per 32)"},
    {FormatId::kQ4_1, "q4_1", 1, FormatFamily::kGgmlBlock, 4, kGgmlBlock, sizeof(BlockQ4_1), 0,
     "llama.cpp q4_1 (4-bit, f16 scale+min per 32)"},
    {FormatId::kQ5_0, "q5_0", 1, FormatFamily::kGgmlBlock, 5, kGgmlBlock, sizeof(BlockQ5_0), 0,
     "llama.cpp q5_0 (symmetric 5-bit, f16 scale per 32)"},
    {FormatId::kQ5_1, "q5_1", 1, FormatFamily::kGgmlBlock, 5, kGgmlBlock, sizeof(BlockQ5_1), 0,
     "llama.cpp q5_1 (5-bit, f16 scale+min per 32)"},
    {FormatId::kIq4Nl, "iq4_nl", 1, FormatFamily::kGgmlBlock, 4, kGgmlBlock, sizeof(BlockIq4Nl), 0,
     "llama.cpp iq4_nl (non-linear 4-bit codebook, f16 scale per 32)"},
    {FormatId::kFp8E4M3, "fp8_e4m3", 1, FormatFamily::kFp8, 8, 0, 0, 0,
     "OCP FP8 E4M3, f32 scale per (layer, head)"},
    {FormatId::kFp8E5M2, "fp8_e5m2", 1, FormatFamily::kFp8, 8, 0, 0, 0,
     "OCP FP8 E5M2, f32 scale per (layer, head)"},
}};

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
