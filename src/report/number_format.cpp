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

std::string format_ratio(double ratio) {
  return fmt::format("{:.2f}x", ratio);
}

std::string format_percent(double fraction) {
  return fmt::format("{:.2f} %", 100.0 * fraction);
}

}  // namespace kvplan::report
