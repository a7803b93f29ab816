#include "core/format_bytes.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvplan {

std::string format_bytes(double bytes, int decimals, int significant_digits) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (!(bytes >= 1024)) return fmt::format("{:.0f} B", bytes);  // NaN too: no unit to index
  double v = bytes;
  int unit = -1;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  if (significant_digits > 0) {
    int fraction_digits = significant_digits - 1;
    for (double integer_limit = 10; v >= integer_limit && fraction_digits > 0;
         integer_limit *= 10) {
      --fraction_digits;
    }
    decimals = std::min(decimals, fraction_digits);
  }
  return fmt::format("{:.{}f} {}", v, decimals, kUnits[unit]);
}

}  // namespace kvplan
