// Number formatting shared by the HTML and Markdown reports, fixed so reports are byte-identical
// for the same inputs (no locale, no platform-dependent float printing). Byte sizes are core's
// format_bytes(bytes, 2, 3): "512 B", "68.0 KiB", "4.00 GiB".
#pragma once

#include <cstdint>
#include <string>

namespace kvplan::report {

// "0.0987", "2.36", "3.08e-06": `digits` significant digits, exponent form below 1e-3.
std::string format_significant(double value, int digits = 4);

// "12,960"
std::string format_count(int64_t value);

// "3.24x"
std::string format_ratio(double ratio);

// "82.41 %"
std::string format_percent(double fraction);

}  // namespace kvplan::report
