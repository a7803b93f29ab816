// Pack and unpack rows of f32 values into a format's bytes (CPU path; the GPU kernels call the
// same per-block math from src/formats/kv_format_math.h, so codes are bit-identical).
//
//   kvplan::PackOptions opt{.group_size = 32};
//   std::vector<uint8_t> bytes(kvplan::packed_row_bytes(f, row.size(), opt.group_size));
//   kvplan::pack_row(f, row, bytes, opt);
//   kvplan::unpack_row(f, bytes, restored, opt);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/format.h"

namespace kvplan {

struct PackOptions {
  size_t group_size = 32;  // uniform-int group; clamped to the row
  float fp8_scale = 1.0f;  // FP8 formats: stored value = fp8(x / fp8_scale), per (layer, head)
  // Unpacking: a format with a rotation_span leaves its rows in the rotated domain (each span
  // still to be rotated back by hadamard_transform); the others ignore it.
  bool rotated_domain = false;
};

// The span of the normalized Hadamard transform that unpacking a row of `row_len` values ends
// with — row_len for whole-row rotations (q4_0_had, tq_mse4), the span (64) of q4_0_had64 and its
// kin — or 0 when the format has no rotated domain a reader can use (every other format).
int rotation_span(Format format, size_t row_len);

// Throws Error(kInvalidArgument) if the format cannot pack the row or `out` is not exactly
// packed_row_bytes(format, values.size(), group_size) long.
void pack_row(Format format, std::span<const float> values, std::span<uint8_t> out,
              const PackOptions& options);
void unpack_row(Format format, std::span<const uint8_t> packed, std::span<float> values,
                const PackOptions& options);

// Packs `n_rows` consecutive rows of `row_len` values (e.g. every KV head of a page of tokens) into
// consecutive packed rows; validates once, so it is the fast path for many short rows.
void pack_rows(Format format, const float* values, size_t n_rows, size_t row_len, uint8_t* out,
               const PackOptions& options);
void unpack_rows(Format format, const uint8_t* packed, size_t n_rows, size_t row_len, float* values,
                 const PackOptions& options);
// The same for rows `value_stride` floats and `out_stride` / `packed_stride` bytes apart (one KV
// head's rows in a page that interleaves heads); the same bytes and values as row by row.
void pack_rows_strided(Format format, const float* values, size_t value_stride, size_t n_rows,
                       size_t row_len, uint8_t* out, size_t out_stride, const PackOptions& options);
void unpack_rows_strided(Format format, const uint8_t* packed, size_t packed_stride, size_t n_rows,
                         size_t row_len, float* values, size_t value_stride,
                         const PackOptions& options);

// Per-channel packing (KIVI keys): `values` is [n_tokens, n_channels] with rows `token_stride`
// floats apart; channel c's n_tokens values become one packed row of packed_row_bytes(format,
// n_tokens, n_tokens) bytes, channels back to back in `out`.
void pack_channels(Format format, const float* values, size_t n_tokens, size_t n_channels,
                   size_t token_stride, std::span<uint8_t> out, const PackOptions& options);
void unpack_channels(Format format, std::span<const uint8_t> packed, size_t n_tokens,
                     size_t n_channels, float* values, size_t token_stride,
                     const PackOptions& options);

// The tensor scale (FP8, NVFP4) that maps |x| <= absmax onto the format's range: FP8's largest
// finite value, NVFP4's 6 x 448 (ModelOpt's amax / (6 * 448)); 1 when absmax is 0.
float fp8_scale_for_absmax(Format format, float absmax);

}  // namespace kvplan
