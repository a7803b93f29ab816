#include "formats/format_size.h"

#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/kv_blocks.h"
#include "formats/kv_row_format.h"

namespace kvplan {

size_t effective_group_size(Format format, size_t n_values, size_t group_size) {
  switch (format.family()) {
    case FormatFamily::kUniformInt: {
      // A format with its own group (int4_g64) ignores the plan's group size.
      const size_t group =
          format.info().group() > 0 ? static_cast<size_t>(format.info().group()) : group_size;
      if (group == 0) {
        fail(ErrorCode::kInvalidArgument, "format {}: group size must be > 0", format.name());
      }
      return group < n_values ? group : n_values;
    }
    default:
      return format.info().block_values() > 0 ? static_cast<size_t>(format.info().block_values())
                                              : n_values;
  }
}

size_t packed_row_bytes(Format format, size_t n_values, size_t group_size) {
  if (n_values == 0) fail(ErrorCode::kInvalidArgument, "format {}: empty row", format.name());
  const KvFormatTraits& info = format.info();
  switch (info.family) {
    case FormatFamily::kUniformInt:
      (void)effective_group_size(format, n_values, group_size);  // refuses group 0
      break;
    case FormatFamily::kOpaqueSlot:
      fail(ErrorCode::kInvalidArgument,
           "format {} is an opaque per-token slot for K and V together; it has no row layout",
           format.name());
    default:
      if (info.rotation_span() > 0 && n_values % static_cast<size_t>(info.rotation_span()) != 0) {
        fail(ErrorCode::kInvalidArgument,
             "format {} rotates spans of {} values with a Hadamard transform: a row of {} values "
             "is not a whole number of spans",
             info.name, info.rotation_span(), n_values);
      }
      if (info.block_values() > 0 && n_values % static_cast<size_t>(info.block_values()) != 0) {
        fail(ErrorCode::kInvalidArgument,
             "format {} packs blocks of {} values; a row of {} values is not a whole number of "
             "blocks (use int8/int4/int2, whose group is clamped to the row)",
             info.name, info.block_values(), n_values);
      }
      if (info.rotated() && info.rotation_span() == 0) {
        // Formats with tables per head_dim start at kMinTabulatedRow.
        const size_t least = static_cast<size_t>(codec_traits(info.codec).least_row);
        if (!rotated_row_fits(static_cast<long>(n_values)) || n_values < least) {
          fail(ErrorCode::kInvalidArgument,
               "format {} rotates whole rows with a Hadamard transform: a row of {} values is not "
               "a power of two from {} to {}",
               info.name, n_values, least, kMaxRotatedRow);
        }
      }
      if (info.bits == 3 && n_values % 8 != 0) {
        fail(
            ErrorCode::kInvalidArgument,
            "format {} packs 3-bit codes in groups of 8: a row of {} values is not a multiple of 8",
            info.name, n_values);
      }
      break;
  }
  constexpr size_t kMaxInt = static_cast<size_t>(std::numeric_limits<int>::max());
  if (n_values > kMaxInt / 8 || group_size > kMaxInt) {
    fail(ErrorCode::kInvalidArgument, "format {}: a row of {} values (group {}) is too large",
         format.name(), n_values, group_size);
  }
  // The size itself comes from the host/device geometry in kernels/, so CPU and GPU cannot differ.
  RowFormat row;
  if (!row_geometry(static_cast<uint16_t>(format.id()), static_cast<int>(n_values),
                    static_cast<int>(group_size), &row)) {
    fail(ErrorCode::kInternal, "format {}: no row geometry for {} values", format.name(), n_values);
  }
  return static_cast<size_t>(row.row_bytes);
}

size_t channel_group_bytes(Format format, size_t head_dim, size_t group_size) {
  return head_dim * packed_row_bytes(format, group_size, group_size);
}

RowFormat kernel_row_format(Format format, int head_dim, int group_size, std::string_view what) {
  RowFormat row;
  if (format.is_slot() ||
      !make_row_format(static_cast<uint16_t>(format.id()), head_dim, group_size, &row)) {
    const int block = format.info().block_values();
    fail(ErrorCode::kInvalidArgument,
         "{}: format {} cannot pack rows of head_dim {} (group {}) in the kernels; {}rows hold up "
         "to {} values",
         what, format.name(), head_dim, group_size,
         block > 0 ? fmt::format("its blocks need a multiple of {}, ", block) : "", kMaxRowValues);
  }
  return row;
}

double effective_bits(Format format, size_t n_values, size_t group_size) {
  return 8.0 * static_cast<double>(packed_row_bytes(format, n_values, group_size)) /
         static_cast<double>(n_values);
}

RowCost row_cost(Format format, size_t head_dim, size_t group_size) {
  const double bytes =
      format.info().per_channel_keys()
          ? static_cast<double>(channel_group_bytes(format, head_dim, group_size)) /
                static_cast<double>(group_size)
          : static_cast<double>(packed_row_bytes(format, head_dim, group_size));
  const double bits = 8.0 * bytes / static_cast<double>(head_dim);
  return {.bytes = bytes, .effective_bits = bits, .overhead_bits = bits - format.info().bits};
}

}  // namespace kvplan
