#include "model/ggml_type.h"

#include <array>

#include "formats/kv_blocks.h"

namespace kvplan {
namespace {

constexpr uint32_t kQK_K = 256;  // K-quant super-block length

constexpr std::array<GgmlTypeInfo, 21> kTypes = {{
    {GgmlType::kF32, "F32", 1, 4},
    {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", kGgmlBlock, sizeof(BlockQ4_0)},
    {GgmlType::kQ4_1, "Q4_1", kGgmlBlock, sizeof(BlockQ4_1)},
    {GgmlType::kQ5_0, "Q5_0", kGgmlBlock, sizeof(BlockQ5_0)},
    {GgmlType::kQ5_1, "Q5_1", kGgmlBlock, sizeof(BlockQ5_1)},
    {GgmlType::kQ8_0, "Q8_0", kGgmlBlock, sizeof(BlockQ8_0)},
    {GgmlType::kQ8_1, "Q8_1", kGgmlBlock, 36},
    {GgmlType::kQ2_K, "Q2_K", kQK_K, 84},
    {GgmlType::kQ3_K, "Q3_K", kQK_K, 110},
    {GgmlType::kQ4_K, "Q4_K", kQK_K, 144},
    {GgmlType::kQ5_K, "Q5_K", kQK_K, 176},
    {GgmlType::kQ6_K, "Q6_K", kQK_K, 210},
    {GgmlType::kQ8_K, "Q8_K", kQK_K, 292},
    {GgmlType::kIQ4_NL, "IQ4_NL", kGgmlBlock, sizeof(BlockIq4Nl)},
    {GgmlType::kI8, "I8", 1, 1},
    {GgmlType::kI16, "I16", 1, 2},
    {GgmlType::kI32, "I32", 1, 4},
    {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},
    {GgmlType::kBF16, "BF16", 1, 2},
}};

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == id) return &info;
  }
  return nullptr;
}

}  // namespace kvplan
