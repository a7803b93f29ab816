#include "formats/format_size.h"

#include "core/error.h"
#include "kernels/kv_blocks.h"

namespace kvplan {

size_t effective_group_size(Format format, size_t n_values, size_t group_size) {
  switch (format.family()) {
    case FormatFamily::kUniformInt:
      if (group_size == 0) {
        fail(ErrorCode::kInvalidArgument, "format {}: group size must be > 0", format.name());
      }
      return group_size < n_values ? group_size : n_values;
    case FormatFamily::kGgmlBlock:
      return kGgmlBlock;
    default:
      return n_values;
  }
}

size_t packed_row_bytes(Format format, size_t n_values, size_t group_size) {
  if (n_values == 0) fail(ErrorCode::kInvalidArgument, "format {}: empty row", format.name());
  const FormatInfo& info = format.info();
  switch (info.family) {
    case FormatFamily::kPlain:
      return n_values * static_cast<size_t>(info.bits / 8);
    case FormatFamily::kFp8:
      return n_values;
    case FormatFamily::kUniformInt: {
      const size_t group = effective_group_size(format, n_values, group_size);
      const size_t full_groups = n_values / group;
      const size_t tail = n_values % group;
      return full_groups * int_group_bytes(group, info.bits) +
             (tail > 0 ? int_group_bytes(tail, info.bits) : 0);
    }
    case FormatFamily::kGgmlBlock:
      if (n_values % kGgmlBlock != 0) {
        fail(ErrorCode::kInvalidArgument,
             "format {} packs blocks of {} values; a row of {} values is not a whole number of "
             "blocks (use int8/int4/int2, whose group is clamped to the row)",
             info.name, kGgmlBlock, n_values);
      }
      return n_values / kGgmlBlock * static_cast<size_t>(info.block_bytes);
    case FormatFamily::kOpaqueSlot:
      fail(ErrorCode::kInvalidArgument,
           "format {} is an opaque per-token slot for K and V together; it has no row layout",
           format.name());
  }
  fail(ErrorCode::kInternal, "unhandled format family");
}

double effective_bits(Format format, size_t n_values, size_t group_size) {
  return 8.0 * static_cast<double>(packed_row_bytes(format, n_values, group_size)) /
         static_cast<double>(n_values);
}

}  // namespace kvplan
