// ggml tensor types as stored in GGUF files: numeric ids (the GGUF spec's values), names and
// block geometry. Only the geometry lives here; dequantization is in tensor_dequant.h.
//
//   const kvplan::GgmlTypeInfo* t = kvplan::ggml_type_info(12);  // Q4_K: 256 values in 144 bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvplan {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;
  uint32_t block_values;  // values per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
};

// nullptr for ids kvplan does not know (the caller reports file, tensor and id).
const GgmlTypeInfo* ggml_type_info(uint32_t id);

}  // namespace kvplan
