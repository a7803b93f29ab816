// A byte count as people read it, in binary units: the one formatter behind the CLI's tables
// ("68.00 KiB") and the reports' ("68.0 KiB"), which differ only in how many decimals they show.
//
//   kvplan::format_bytes(136, 2);              // "136 B" (bytes are always whole)
//   kvplan::format_bytes(68.0 * 1024, 2);      // "68.00 KiB"
//   kvplan::format_bytes(68.0 * 1024, 2, 3);   // "68.0 KiB": three significant digits at most
//   kvplan::format_bytes(512.0 * (1 << 20), 2, 3);  // "512 MiB"
#pragma once

#include <string>

namespace kvplan {

// `bytes` in B below 1 KiB, else in the largest of KiB .. PiB that keeps the number at least 1,
// with `decimals` decimals; a `significant_digits` above 0 drops decimals until the number shows
// no more than that many significant digits.
std::string format_bytes(double bytes, int decimals, int significant_digits = 0);

}  // namespace kvplan
