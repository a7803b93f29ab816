#include "report/number_format.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace kvplan::report {

std::string format_significant(double value, int digits) {
  if (!std::isfinite(value)) return "n/a";
  if (value == 0) return "0";
  const double magnitude = std::fabs(value);
  if (magnitude < 1e-3 || magnitude >= 1e7) return fmt::format("{:.{}e}", value, digits - 1);
  const int integer_digits = static_cast<int>(std::floor(std::log10(magnitude))) + 1;
  return fmt::format("{:.{}f}", value, std::max(0, digits - integer_digits));
}

std::string format_count(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  double v = bytes;
  int unit = -1;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", v, v >= 100 ? 0 : v >= 10 ? 1 : 2, kUnits[unit]);
}

std::string format_ratio(double ratio) {
  return fmt::format("{:.2f}x", ratio);
}

std::string format_percent(double fraction) {
  return fmt::format("{:.2f} %", 100.0 * fraction);
}

}  // namespace kvplan::report
