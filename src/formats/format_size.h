// Byte sizes of packed rows — the one place size math for KV formats lives.
//
// A "row" is the run of values one pack call turns into bytes: head_dim values of one token and
// KV head (per-token mode), or group_size tokens of one channel (per-channel/KIVI keys).
//
//   kvplan::packed_row_bytes(kvplan::Format::parse("q8_0"), 128, 32);  // 136
//   kvplan::packed_row_bytes(kvplan::Format::parse("int4"), 8, 32);    // group clamped to 8: 8 B
#pragma once

#include <cstddef>

#include <string_view>

#include "formats/format.h"
#include "formats/kv_row_format.h"

namespace kvplan {

// The group a uniform-int row really uses: group_size clamped to the row (ARCHITECTURE §3.1).
// For ggml blocks it is 32; for plain and fp8 formats the whole row.
size_t effective_group_size(Format format, size_t n_values, size_t group_size);

// Exact bytes of one packed row. Throws Error(kInvalidArgument) when the format cannot pack such a
// row — a ggml block format on a row that is not a multiple of 32 values, group_size 0, or a slot
// (slots are sized per token, see Format::slot_bytes) — with a message naming format and sizes.
size_t packed_row_bytes(Format format, size_t n_values, size_t group_size);

// Bytes of group_size tokens of one KV head's keys packed per channel (KIVI): head_dim rows of
// group_size values each. Throws like packed_row_bytes.
size_t channel_group_bytes(Format format, size_t head_dim, size_t group_size);

// The kernels' geometry of a row (src/formats/kv_row_format.h) for code that launches them. Throws
// Error(kInvalidArgument) starting with `what` when the kernels cannot pack such rows: a slot, a
// block format on a row that is not whole blocks, group 0, or a row over kMaxRowValues.
RowFormat kernel_row_format(Format format, int head_dim, int group_size, std::string_view what);

// 8 * bytes / values: bits per value including scales, zero points and block overhead.
double effective_bits(Format format, size_t n_values, size_t group_size);

// What a row of head_dim values costs in a format, as `kvplan formats` lists it. A per-channel
// (KIVI) key format's row is one token's share of its groups: head_dim channels x the bytes of
// group_size tokens / group_size.
struct RowCost {
  double bytes = 0;
  double effective_bits = 0;  // 8 * bytes / head_dim
  double overhead_bits = 0;   // effective minus nominal bits: scales, zero points, block overhead
};

// Throws like packed_row_bytes when the format cannot pack such rows.
RowCost row_cost(Format format, size_t head_dim, size_t group_size);

}  // namespace kvplan
