// The KV format registry: every packed format kvplan knows, one line each, in the style of ggml's
// type_traits. Everything else derives from this table: the FormatId enum and catalogue
// (src/formats/format.h), the row geometry and the pack/unpack dispatch shared by the CPU and the
// GPU kernels (kv_row_format.h), the byte sizes, `kvplan formats`, the default search catalogue and
// the engines an export may name. Adding a format = one line here + its math in kv_format_math.h
// (one case in kv_row_format.h's unit dispatch when it brings a new codec) + its tests.
//
// Plain C++ usable from device code: the table is an X-macro, expanded into a switch for lookups
// (nvcc cannot read a host constexpr array from device code) and into arrays on the host.
//
//   kvplan::KvFormatTraits t = kvplan::kv_format_traits(kvplan::kFmtQ4_0);
//   t.unit_values;  // 32 values per block, t.unit_bytes == 18
#pragma once

#include <cstdint>

#include "formats/kv_blocks.h"
#include "formats/kvplan_hd.h"

namespace kvplan {

enum class FormatFamily : uint8_t {
  kPlain,         // f32 / f16 / bf16
  kUniformInt,    // int8 / int4 / int2: asymmetric min/max groups, f16 scale + zero
  kGgml,          // llama.cpp blocks of 32
  kFp8,           // OCP FP8 with a per-(layer, head) f32 scale kept outside the row
  kMicroscaled,   // small floats with a float scale per block (OCP MX, NVFP4)
  kTurboQuant,    // vLLM's TurboQuant rows: rotated Lloyd-Max keys, per-row uniform values, raw FP8
  kRotatedInt,    // ints of a randomized-Hadamard-rotated row, one scale per row (vLLM int4 KV)
  kRowScaledInt,  // symmetric ints of the row as it is, one f32 scale per row (vLLM int8 KV)
  kOpaqueSlot,    // bytes kvplan stores and moves but never interprets
};

// How a row of head_dim values splits into units packed independently of each other.
enum class RowUnit : uint8_t {
  kValue,     // unit_bytes bytes per value, kPlainUnitValues values per unit
  kIntGroup,  // asymmetric int groups of unit_values values (0: the plan's group_size)
  kBlock,     // blocks of unit_values values in unit_bytes bytes; rows must be whole blocks
  // Blocks of unit_values values whose unit_bytes of codes fill the row's first part, followed
  // by one scale byte per block (vLLM's NVFP4 row); rows must be whole blocks.
  kSplitBlock,
  // The whole row is one unit: `bits` per value packed densely, then unit_bytes bytes of the row's
  // parameters (its scale, norm, minimum). Codecs that rotate the row (CodecTraits::rotates) need
  // a power of two in [kMinTabulatedRow, kMaxRotatedRow]; 3-bit codes need whole groups of 8.
  kRow,
  // The row rotated by the normalized Walsh-Hadamard transform, then packed as blocks of
  // unit_values values in unit_bytes bytes. The rotation mixes every value of the row, so the row
  // is one unit; head_dim must be a power of two, whole blocks, at most kMaxRotatedRow values.
  kRotatedBlocks,
  // The row cut into spans of unit_values values, each rotated by a Walsh-Hadamard transform of
  // its own and packed as ggml blocks (unit_bytes bytes per span): llama.cpp rotates V this way,
  // in spans of kHadamardSpan, at every head_dim that is a multiple of it. The span is the unit.
  kRotatedSpans,
};

// The math that packs one unit (formats/math/): one row per distinct algorithm, with what the rest
// of kvplan needs to know of it.
// X(enum, inner, rotates, least_row, int_bits, per_value)
//   inner      the ggml codec a Hadamard codec packs the rotated values with (q4_0 for q4_0_had and
//              q4_0_had64: the cache type a rotating engine is given); None for every other codec
//   rotates    it rotates its unit before quantizing it (the Hadamard formats, TurboQuant keys,
//              vLLM's int4 rows): the whole row, or a span of it (RowUnit::kRotatedSpans)
//   least_row  the least row it packs: codecs with tables per head_dim start at kMinTabulatedRow
//   int_bits   bits per code of the asymmetric int groups; 0 for every other codec
//   per_value  it packs each value on its own (a row of them is one long unit)
// clang-format off
#define KVPLAN_CODECS(X)                                                 \
  X(None,                 None,  false, 1,                0, false)      \
  X(F32,                  None,  false, 1,                0, true)       \
  X(F16,                  None,  false, 1,                0, true)       \
  X(BF16,                 None,  false, 1,                0, true)       \
  X(Int8,                 None,  false, 1,                8, false)      \
  X(Int4,                 None,  false, 1,                4, false)      \
  X(Int2,                 None,  false, 1,                2, false)      \
  X(Q8_0,                 None,  false, 1,                0, false)      \
  X(Q4_0,                 None,  false, 1,                0, false)      \
  X(Q4_1,                 None,  false, 1,                0, false)      \
  X(Q5_0,                 None,  false, 1,                0, false)      \
  X(Q5_1,                 None,  false, 1,                0, false)      \
  X(Iq4Nl,                None,  false, 1,                0, false)      \
  X(Fp8E4M3,              None,  false, 1,                0, true)       \
  X(Fp8E5M2,              None,  false, 1,                0, true)       \
  X(Mxfp4,                None,  false, 1,                0, false)      \
  X(Mxfp6E2M3,            None,  false, 1,                0, false)      \
  X(Mxfp8E4M3,            None,  false, 1,                0, false)      \
  X(Nvfp4,                None,  false, 1,                0, false)      \
  X(Fp8E4M3PerTokenHead,  None,  false, 1,                0, false)      \
  X(HadamardQ8_0,         Q8_0,  true,  1,                0, false)      \
  X(HadamardQ4_0,         Q4_0,  true,  1,                0, false)      \
  X(HadamardIq4Nl,        Iq4Nl, true,  1,                0, false)      \
  X(TqFp8,                None,  false, 1,                0, true)       \
  X(TqMse3,               None,  true,  kMinTabulatedRow, 0, false)      \
  X(TqMse4,               None,  true,  kMinTabulatedRow, 0, false)      \
  X(TqInt3,               None,  false, 1,                0, false)      \
  X(TqInt4,               None,  false, 1,                0, false)      \
  X(Int4PerTokenHead,     None,  true,  kMinTabulatedRow, 0, false)      \
  X(Int8PerTokenHead,     None,  false, 1,                0, false)      \
  X(HadamardQ4_1,         Q4_1,  true,  1,                0, false)      \
  X(HadamardQ5_0,         Q5_0,  true,  1,                0, false)      \
  X(HadamardQ5_1,         Q5_1,  true,  1,                0, false)      \
  X(Q6_0,                 None,  false, 1,                0, false)      \
  X(HadamardQ6_0,         Q6_0,  true,  1,                0, false)
// clang-format on

#define KVPLAN_CODEC_ENUMERATOR(e, ...) k##e,
enum class Codec : uint8_t { KVPLAN_CODECS(KVPLAN_CODEC_ENUMERATOR) };
#undef KVPLAN_CODEC_ENUMERATOR

struct CodecTraits {
  Codec inner = Codec::kNone;
  bool rotates = false;
  int least_row = 1;
  int int_bits = 0;
  bool per_value = false;
};

KVPLAN_HD constexpr CodecTraits codec_traits(Codec c) {
  switch (c) {
#define KVPLAN_CODEC_CASE(e, inner, rotates, least_row, int_bits, per_value) \
  case Codec::k##e:                                                          \
    return {Codec::k##inner, rotates, least_row, int_bits, per_value};
    KVPLAN_CODECS(KVPLAN_CODEC_CASE)
#undef KVPLAN_CODEC_CASE
  }
  return {};
}

// Serving engines whose KV cache can hold a format as kvplan packs it (docs/engines.md
// has each engine's accepted values and their sources).
inline constexpr uint32_t kEngineLlamaCpp = 1u << 0;    // -ctk/-ctv cache types
inline constexpr uint32_t kEngineIkLlamaCpp = 1u << 1;  // ik_llama.cpp's cache types
inline constexpr uint32_t kEngineVllm = 1u << 2;        // --kv-cache-dtype
inline constexpr uint32_t kEngineTrtllm = 1u << 3;      // KvCacheConfig.dtype
inline constexpr uint32_t kEngineModelopt = 1u << 4;    // kv_cache_quant_algo
inline constexpr uint32_t kEngineHf = 1u << 5;          // KVTuner's per-layer nbits (transformers)
inline constexpr uint32_t kEngineVllmTurboquant = 1u << 6;  // --kv-cache-dtype turboquant_*
inline constexpr uint32_t kEngineLlamas = kEngineLlamaCpp | kEngineIkLlamaCpp;

// X(enum, id, name, version, family, bits, codec, unit, unit_values, unit_bytes,
//   per_channel_layout, tensor_scale_range, default_candidate, engines, meaning)
// Numeric ids are written into plans and stored objects: never renumber, only append.
// clang-format off
#define KVPLAN_KV_FORMATS(X)                                                                     \
  X(F32, 1, "f32", 1, kPlain, 32, kF32, kValue, 1, 4, 0, 0.0f, false, kEngineLlamas,             \
    "IEEE float32")                                                                              \
  X(F16, 2, "f16", 1, kPlain, 16, kF16, kValue, 1, 2, 0, 0.0f, true,                             \
    kEngineLlamas | kEngineVllm | kEngineTrtllm, "IEEE float16")                                 \
  X(BF16, 3, "bf16", 1, kPlain, 16, kBF16, kValue, 1, 2, 0, 0.0f, true,                          \
    kEngineLlamas | kEngineVllm | kEngineTrtllm, "bfloat16")                                     \
  X(Int8, 16, "int8", 1, kUniformInt, 8, kInt8, kIntGroup, 0, 0, 0, 0.0f, true, kEngineHf,         \
    "asymmetric 8-bit, f16 scale+zero per group")                                                \
  X(Int4, 17, "int4", 1, kUniformInt, 4, kInt4, kIntGroup, 0, 0, 0, 0.0f, true, kEngineHf,         \
    "asymmetric 4-bit, f16 scale+zero per group")                                                \
  X(Int2, 18, "int2", 1, kUniformInt, 2, kInt2, kIntGroup, 0, 0, 0, 0.0f, true, kEngineHf,         \
    "asymmetric 2-bit, f16 scale+zero per group")                                                \
  X(Int8G64, 19, "int8_g64", 1, kUniformInt, 8, kInt8, kIntGroup, 64, 0, 0, 0.0f, true, 0,       \
    "asymmetric 8-bit, f16 scale+zero per 64 values")                                            \
  X(Int8G128, 20, "int8_g128", 1, kUniformInt, 8, kInt8, kIntGroup, 128, 0, 0, 0.0f, true, 0,    \
    "asymmetric 8-bit, f16 scale+zero per 128 values")                                           \
  X(Int4G64, 21, "int4_g64", 1, kUniformInt, 4, kInt4, kIntGroup, 64, 0, 0, 0.0f, true, 0,       \
    "asymmetric 4-bit, f16 scale+zero per 64 values")                                            \
  X(Int4G128, 22, "int4_g128", 1, kUniformInt, 4, kInt4, kIntGroup, 128, 0, 0, 0.0f, true, 0,    \
    "asymmetric 4-bit, f16 scale+zero per 128 values")                                           \
  X(Int2G64, 23, "int2_g64", 1, kUniformInt, 2, kInt2, kIntGroup, 64, 0, 0, 0.0f, true, 0,       \
    "asymmetric 2-bit, f16 scale+zero per 64 values")                                            \
  X(Int2G128, 24, "int2_g128", 1, kUniformInt, 2, kInt2, kIntGroup, 128, 0, 0, 0.0f, true, 0,    \
    "asymmetric 2-bit, f16 scale+zero per 128 values")                                           \
  X(Int8Kivi, 25, "int8_kivi", 1, kUniformInt, 8, kInt8, kIntGroup, 0, 0, 16, 0.0f, true, 0,     \
    "keys only: int8 per channel over group_size tokens (KIVI), newest tokens bf16")             \
  X(Int4Kivi, 26, "int4_kivi", 1, kUniformInt, 4, kInt4, kIntGroup, 0, 0, 17, 0.0f, true, 0,     \
    "keys only: int4 per channel over group_size tokens (KIVI), newest tokens bf16")             \
  X(Int2Kivi, 27, "int2_kivi", 1, kUniformInt, 2, kInt2, kIntGroup, 0, 0, 18, 0.0f, true, 0,     \
    "keys only: int2 per channel over group_size tokens (KIVI), newest tokens bf16")             \
  X(Q8_0, 32, "q8_0", 1, kGgml, 8, kQ8_0, kBlock, kGgmlBlock, sizeof(BlockQ8_0), 0, 0.0f,   \
    true, kEngineLlamas, "llama.cpp q8_0 (symmetric 8-bit, f16 scale per 32)")                   \
  X(Q4_0, 33, "q4_0", 1, kGgml, 4, kQ4_0, kBlock, kGgmlBlock, sizeof(BlockQ4_0), 0, 0.0f,   \
    true, kEngineLlamas, "llama.cpp q4_0 (symmetric 4-bit, f16 scale per 32)")                   \
  X(Q4_1, 34, "q4_1", 1, kGgml, 4, kQ4_1, kBlock, kGgmlBlock, sizeof(BlockQ4_1), 0, 0.0f,   \
    true, kEngineLlamas, "llama.cpp q4_1 (4-bit, f16 scale+min per 32)")                         \
  X(Q5_0, 35, "q5_0", 1, kGgml, 5, kQ5_0, kBlock, kGgmlBlock, sizeof(BlockQ5_0), 0, 0.0f,   \
    true, kEngineLlamas, "llama.cpp q5_0 (symmetric 5-bit, f16 scale per 32)")                   \
  X(Q5_1, 36, "q5_1", 1, kGgml, 5, kQ5_1, kBlock, kGgmlBlock, sizeof(BlockQ5_1), 0, 0.0f,   \
    true, kEngineLlamas, "llama.cpp q5_1 (5-bit, f16 scale+min per 32)")                         \
  X(Iq4Nl, 37, "iq4_nl", 1, kGgml, 4, kIq4Nl, kBlock, kGgmlBlock, sizeof(BlockIq4Nl), 0,    \
    0.0f, true, kEngineLlamas, "llama.cpp iq4_nl (non-linear 4-bit codebook, f16 scale per 32)") \
  X(Fp8E4M3, 48, "fp8_e4m3", 1, kFp8, 8, kFp8E4M3, kValue, 1, 1, 0, 448.0f, true,                \
    kEngineVllm | kEngineTrtllm | kEngineModelopt, "OCP FP8 E4M3, f32 scale per (layer, head)")  \
  X(Fp8E5M2, 49, "fp8_e5m2", 1, kFp8, 8, kFp8E5M2, kValue, 1, 1, 0, 57344.0f, true,              \
    kEngineVllm, "OCP FP8 E5M2, f32 scale per (layer, head)")                                    \
  X(Mxfp4, 80, "mxfp4", 1, kMicroscaled, 4, kMxfp4, kBlock, kMxBlock, sizeof(BlockMxfp4), 0,     \
    0.0f, true, 0, "OCP MXFP4 as ggml stores it (E2M1 codes, E8M0 scale per 32)")               \
  X(Mxfp6E2M3, 81, "mxfp6_e2m3", 1, kMicroscaled, 6, kMxfp6E2M3, kBlock, kMxBlock,               \
    sizeof(BlockMxfp6), 0, 0.0f, true, 0, "OCP MXFP6 E2M3 (E8M0 scale per 32)")                 \
  X(Mxfp8E4M3, 82, "mxfp8_e4m3", 1, kMicroscaled, 8, kMxfp8E4M3, kBlock, kMxBlock,               \
    sizeof(BlockMxfp8), 0, 0.0f, true, 0, "OCP MXFP8 E4M3 (E8M0 scale per 32)")                 \
  X(Nvfp4, 83, "nvfp4", 1, kMicroscaled, 4, kNvfp4, kSplitBlock, kNvfp4Group,                    \
    kNvfp4GroupCodeBytes, 0,                                                                     \
    2688.0f, true, kEngineVllm | kEngineTrtllm | kEngineModelopt,                               \
    "NVFP4 (E2M1 codes, E4M3 scale per 16, f32 scale per (layer, head))")                       \
  X(Fp8E4M3PerTokenHead, 84, "fp8_per_token_head", 1, kFp8, 8, kFp8E4M3PerTokenHead, kRow, 0,     \
    kRowScaleBytes, 0, 0.0f, true, kEngineVllm,                                                 \
    "FP8 E4M3 with an f32 scale per (token, head), as vLLM's")                                   \
  X(Q8_0Had, 85, "q8_0_had", 1, kGgml, 8, kHadamardQ8_0, kRotatedBlocks, kGgmlBlock,             \
    sizeof(BlockQ8_0), 0, 0.0f, true, 0, "q8_0 of the Hadamard-rotated row")                    \
  X(Q4_0Had, 86, "q4_0_had", 1, kGgml, 4, kHadamardQ4_0, kRotatedBlocks, kGgmlBlock,             \
    sizeof(BlockQ4_0), 0, 0.0f, true, 0, "q4_0 of the Hadamard-rotated row")                    \
  X(Iq4NlHad, 87, "iq4_nl_had", 1, kGgml, 4, kHadamardIq4Nl, kRotatedBlocks, kGgmlBlock,         \
    sizeof(BlockIq4Nl), 0, 0.0f, true, 0, "iq4_nl of the Hadamard-rotated row")               \
  X(TqFp8, 88, "tq_fp8", 1, kTurboQuant, 8, kTqFp8, kValue, 1, 1, 0, 0.0f, true,                 \
    kEngineVllmTurboquant, "E4M3 with no scale, saturating (vLLM turboquant_k8v4's keys)")       \
  X(TqMse3, 89, "tq_mse3", 1, kTurboQuant, 3, kTqMse3, kRow, 0, kTqNormBytes, 0, 0.0f, true,      \
    kEngineVllmTurboquant,                                                                        \
    "unit row x Hadamard, 3-bit Lloyd-Max codes, f16 norm (vLLM TurboQuant keys)")               \
  X(TqMse4, 90, "tq_mse4", 1, kTurboQuant, 4, kTqMse4, kRow, 0, kTqNormBytes, 0, 0.0f, true,      \
    kEngineVllmTurboquant,                                                                        \
    "unit row x Hadamard, 4-bit Lloyd-Max codes, f16 norm (vLLM TurboQuant keys)")               \
  X(TqInt3, 91, "tq_int3", 1, kTurboQuant, 3, kTqInt3, kRow, 0, kTqScaleMinBytes, 0, 0.0f, true,  \
    kEngineVllmTurboquant, "3-bit asymmetric per row, f16 scale + min after (vLLM TurboQuant V)") \
  X(TqInt4, 92, "tq_int4", 1, kTurboQuant, 4, kTqInt4, kRow, 0, kTqScaleMinBytes, 0, 0.0f, true,  \
    kEngineVllmTurboquant, "4-bit asymmetric per row, f16 scale + min after (vLLM TurboQuant V)") \
  X(Int4PerTokenHead, 93, "int4_per_token_head", 1, kRotatedInt, 4, kInt4PerTokenHead, kRow, 0,   \
    kRowScaleBytes, 0, 0.0f, true, kEngineVllm,                                                 \
    "4-bit asymmetric of the signed-Hadamard row, f32 scale + zero point per row (vLLM's)")       \
  X(Int8PerTokenHead, 94, "int8_per_token_head", 1, kRowScaledInt, 8, kInt8PerTokenHead, kRow, 0, \
    kRowScaleBytes, 0, 0.0f, true, kEngineVllm,                                                 \
    "int8 symmetric with an f32 scale per (token, head), as vLLM's")                            \
  X(Q4_1Had, 95, "q4_1_had", 1, kGgml, 4, kHadamardQ4_1, kRotatedBlocks, kGgmlBlock,             \
    sizeof(BlockQ4_1), 0, 0.0f, false, 0, "q4_1 of the Hadamard-rotated row")                   \
  X(Q5_0Had, 96, "q5_0_had", 1, kGgml, 5, kHadamardQ5_0, kRotatedBlocks, kGgmlBlock,             \
    sizeof(BlockQ5_0), 0, 0.0f, false, 0, "q5_0 of the Hadamard-rotated row")                   \
  X(Q5_1Had, 97, "q5_1_had", 1, kGgml, 5, kHadamardQ5_1, kRotatedBlocks, kGgmlBlock,             \
    sizeof(BlockQ5_1), 0, 0.0f, false, 0, "q5_1 of the Hadamard-rotated row")                   \
  X(Q8_0Had64, 98, "q8_0_had64", 1, kGgml, 8, kHadamardQ8_0, kRotatedSpans, kHadamardSpan,       \
    kHadamardSpanBlocks * sizeof(BlockQ8_0), 0, 0.0f, true, 0,                                  \
    "q8_0 of the row rotated in spans of 64 (llama.cpp's V rotation)")                          \
  X(Q4_0Had64, 99, "q4_0_had64", 1, kGgml, 4, kHadamardQ4_0, kRotatedSpans, kHadamardSpan,       \
    kHadamardSpanBlocks * sizeof(BlockQ4_0), 0, 0.0f, true, 0,                                  \
    "q4_0 of the row rotated in spans of 64 (llama.cpp's V rotation)")                          \
  X(Q4_1Had64, 100, "q4_1_had64", 1, kGgml, 4, kHadamardQ4_1, kRotatedSpans, kHadamardSpan,      \
    kHadamardSpanBlocks * sizeof(BlockQ4_1), 0, 0.0f, false, 0,                                 \
    "q4_1 of the row rotated in spans of 64 (llama.cpp's V rotation)")                          \
  X(Q5_0Had64, 101, "q5_0_had64", 1, kGgml, 5, kHadamardQ5_0, kRotatedSpans, kHadamardSpan,      \
    kHadamardSpanBlocks * sizeof(BlockQ5_0), 0, 0.0f, false, 0,                                 \
    "q5_0 of the row rotated in spans of 64 (llama.cpp's V rotation)")                          \
  X(Q5_1Had64, 102, "q5_1_had64", 1, kGgml, 5, kHadamardQ5_1, kRotatedSpans, kHadamardSpan,      \
    kHadamardSpanBlocks * sizeof(BlockQ5_1), 0, 0.0f, false, 0,                                 \
    "q5_1 of the row rotated in spans of 64 (llama.cpp's V rotation)")                          \
  X(Iq4NlHad64, 103, "iq4_nl_had64", 1, kGgml, 4, kHadamardIq4Nl, kRotatedSpans, kHadamardSpan,  \
    kHadamardSpanBlocks * sizeof(BlockIq4Nl), 0, 0.0f, true, 0,                                 \
    "iq4_nl of the row rotated in spans of 64 (llama.cpp's V rotation)")                        \
  X(Q6_0, 104, "q6_0", 1, kGgml, 6, kQ6_0, kBlock, kGgmlBlock, sizeof(BlockQ6_0), 0, 0.0f,       \
    false, kEngineIkLlamaCpp, "ik_llama.cpp q6_0 (symmetric 6-bit, f16 scale per 32)")           \
  X(Q6_0Had, 105, "q6_0_had", 1, kGgml, 6, kHadamardQ6_0, kRotatedBlocks, kGgmlBlock,            \
    sizeof(BlockQ6_0), 0, 0.0f, false, 0, "q6_0 of the Hadamard-rotated row")                   \
  X(Q6_0Had64, 106, "q6_0_had64", 1, kGgml, 6, kHadamardQ6_0, kRotatedSpans, kHadamardSpan,      \
    kHadamardSpanBlocks * sizeof(BlockQ6_0), 0, 0.0f, false, 0,                                 \
    "q6_0 of the row rotated in spans of 64 (ik_llama.cpp's -khad/-vhad at such heads)")
// clang-format on

// One enumerator per line of the table (kF16, kQ4_0, ...), plus the opaque slot. Numeric ids are
// written into plans and stored objects.
#define KVPLAN_FORMAT_ENUMERATOR(e, id, ...) k##e = id,
enum class FormatId : uint16_t {
  KVPLAN_KV_FORMATS(KVPLAN_FORMAT_ENUMERATOR)  //
  kSlot = 64,  // opaque engine slot: N bytes per token per KV head for K and V together
};
#undef KVPLAN_FORMAT_ENUMERATOR

// One line of the table, and what follows from it.
struct KvFormatTraits {
  FormatId id{};  // written into plans and stored objects
  const char* name = "";
  uint16_t version = 0;
  FormatFamily family = FormatFamily::kOpaqueSlot;
  int bits = 0;  // nominal bits per value (0 for slots: depends on N and head_dim)
  Codec codec = Codec::kNone;
  RowUnit unit = RowUnit::kValue;
  int unit_values = 0;  // kBlock: values per block; kIntGroup: fixed group (0 = the plan's)
  int unit_bytes = 0;   // kBlock: bytes per block; kValue: bytes per value
  // KIVI key formats pack each channel over group_size tokens with the row layout of this int
  // format id; values refuse them, and the layer keeps KIVI's full-precision residual window
  // (formats/quant_settings.h, layer_runs_kivi). 0 for every other format.
  uint16_t per_channel_layout = 0;
  // > 0: the format stores x / s with an f32 scale s per (layer, KV head) kept outside the row,
  // calibrated as s = absmax / tensor_scale_range (formats/fp8_scales.h; FP8: the largest finite
  // value; NVFP4: 6 x 448).
  float tensor_scale_range = 0.0f;
  bool default_candidate = false;  // searched when the user names no formats
  uint32_t engines = 0;            // kEngine* bits
  const char* meaning = "";

  // Values per block of the block formats (ggml, MX, NVFP4, rotated blocks and spans), else 0.
  KVPLAN_HD constexpr int block_values() const {
    const bool blocks = unit == RowUnit::kBlock || unit == RowUnit::kSplitBlock ||
                        unit == RowUnit::kRotatedBlocks || unit == RowUnit::kRotatedSpans;
    return blocks ? unit_values : 0;
  }
  // Bytes per block, scale included (a split block's scale byte sits after the row's codes but
  // belongs to the block), else 0.
  KVPLAN_HD constexpr int block_bytes() const {
    if (block_values() == 0) return 0;
    return unit == RowUnit::kSplitBlock ? unit_bytes + 1 : unit_bytes;
  }
  // Uniform int groups: the format's own group (0 = the plan's group_size); 0 otherwise.
  KVPLAN_HD constexpr int group() const { return unit == RowUnit::kIntGroup ? unit_values : 0; }
  KVPLAN_HD constexpr bool per_channel_keys() const { return per_channel_layout != 0; }
  // Packs the Hadamard-rotated row (head_dim a power of two, <= 512) or its spans.
  KVPLAN_HD constexpr bool rotated() const { return codec_traits(codec).rotates; }
  // Rotated formats: the values rotated together, 0 for the whole row (q4_0_had), else each span
  // of that many values on its own (q4_0_had64: llama.cpp's V rotation).
  KVPLAN_HD constexpr int rotation_span() const {
    return unit == RowUnit::kRotatedSpans ? unit_values : 0;
  }
  [[nodiscard]] constexpr bool has_tensor_scale() const { return tensor_scale_range > 0.0f; }
};

// FormatId values for code that cannot include src/formats/format.h (device code).
#define KVPLAN_FORMAT_ID_CONSTANT(e, id, ...) inline constexpr uint16_t kFmt##e = id;
KVPLAN_KV_FORMATS(KVPLAN_FORMAT_ID_CONSTANT)
#undef KVPLAN_FORMAT_ID_CONSTANT

#define KVPLAN_FORMAT_TRAITS(e, id, name, version, family, bits, codec, unit, unit_values,         \
                             unit_bytes, layout, scale_range, default_candidate, engines, meaning) \
  KvFormatTraits {                                                                                 \
    static_cast<FormatId>(id), name, version, FormatFamily::family, bits, Codec::codec,            \
        RowUnit::unit, unit_values, static_cast<int>(unit_bytes), layout, scale_range,             \
        default_candidate, engines, meaning                                                        \
  }

// The traits of format `id`; codec kNone (and id 0) when the id is unknown.
KVPLAN_HD constexpr KvFormatTraits kv_format_traits(uint16_t id) {
  switch (id) {
#define KVPLAN_FORMAT_CASE(e, id, ...) \
  case id:                             \
    return KVPLAN_FORMAT_TRAITS(e, id, __VA_ARGS__);
    KVPLAN_KV_FORMATS(KVPLAN_FORMAT_CASE)
#undef KVPLAN_FORMAT_CASE
    default:
      return KvFormatTraits{};
  }
}

// Every format, in table order (host code).
#define KVPLAN_FORMAT_ENTRY(...) KVPLAN_FORMAT_TRAITS(__VA_ARGS__),
inline constexpr KvFormatTraits kKvFormatTable[] = {KVPLAN_KV_FORMATS(KVPLAN_FORMAT_ENTRY)};
#undef KVPLAN_FORMAT_ENTRY

// The id whose row layout `id` packs with (a KIVI key format's int format; itself otherwise).
KVPLAN_HD constexpr uint16_t row_layout_id(uint16_t id) {
  const uint16_t layout = kv_format_traits(id).per_channel_layout;
  return layout != 0 ? layout : id;
}

// The traits of the opaque slot, which has no line of the table (its size is N per token).
inline constexpr KvFormatTraits kSlotTraits{
    .id = FormatId::kSlot,
    .name = "slot",
    .version = 1,
    .meaning = "opaque engine slot: N bytes per token per KV head (K+V)"};

// What an engine's own configuration calls a format where that is not kvplan's name (TensorRT-LLM's
// KvCacheConfig.dtype, ModelOpt's quant_algo, KVTuner's nbits, which also name the "KV8", "K8V4"
// pairs); the other engines take kvplan's names.
// X(engine bit, format, spelling)
#define KVPLAN_ENGINE_SPELLINGS(X)   \
  X(kEngineHf, BF16, "16")           \
  X(kEngineHf, Int8, "8")            \
  X(kEngineHf, Int4, "4")            \
  X(kEngineHf, Int2, "2")            \
  X(kEngineTrtllm, Fp8E4M3, "fp8")   \
  X(kEngineTrtllm, Nvfp4, "nvfp4")   \
  X(kEngineTrtllm, BF16, "bfloat16") \
  X(kEngineTrtllm, F16, "float16")   \
  X(kEngineModelopt, Fp8E4M3, "FP8") \
  X(kEngineModelopt, Nvfp4, "NVFP4")

// The engine's name of format `id`; nullptr where it has none.
constexpr const char* engine_spelling(uint32_t engine, FormatId id) {
#define KVPLAN_SPELLING_CASE(bit, e, text) \
  if (engine == bit && id == FormatId::k##e) return text;
  KVPLAN_ENGINE_SPELLINGS(KVPLAN_SPELLING_CASE)
#undef KVPLAN_SPELLING_CASE
  return nullptr;
}

// The format the engine calls `spelling`; kSlot (never a spelling) where none is.
constexpr FormatId format_of_spelling(uint32_t engine, const char* spelling, size_t length) {
  const auto equal = [&](const char* text) {
    size_t i = 0;
    while (i < length && text[i] != '\0' && text[i] == spelling[i]) ++i;
    return i == length && text[i] == '\0';
  };
#define KVPLAN_SPELLING_LOOKUP(bit, e, text) \
  if (engine == bit && equal(text)) return FormatId::k##e;
  KVPLAN_ENGINE_SPELLINGS(KVPLAN_SPELLING_LOOKUP)
#undef KVPLAN_SPELLING_LOOKUP
  return FormatId::kSlot;
}

}  // namespace kvplan
