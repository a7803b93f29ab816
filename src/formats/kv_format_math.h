// Quantize/dequantize math for every packed KV format: one block or group at a time, pure inline
// functions compiled for both the CPU (src/formats) and the GPU kernels, so both produce identical
// codes. Layouts are in kv_blocks.h. The ggml-compatible quantizers reproduce ggml's reference
// quantizers (quantize_row_*_ref) operation for operation — same rounding, same order of float
// operations — so their bytes are identical; build with -ffp-contract=off to keep it that way.
//
//   uint8_t block[18];
//   kvplan::quantize_block_q4_0(x, block);       // x: 32 floats
//   kvplan::dequantize_block_q4_0(block, y);
//
// One header per codec family in src/formats/math/; this header includes them all.
#pragma once

#include "formats/math/common.h"
#include "formats/math/ggml_blocks.h"
#include "formats/math/hadamard.h"
#include "formats/math/microscaled.h"
#include "formats/math/turboquant.h"
#include "formats/math/uniform_int.h"
#include "formats/math/vllm_rows.h"
