#include "core/format_bytes.h"

#include <gtest/gtest.h>

namespace kvplan {
namespace {

constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kPiB = kGiB * 1024 * 1024;

TEST(FormatBytes, FixedDecimalsAsTheCliTablesPrint) {
  EXPECT_EQ(format_bytes(0, 2), "0 B");
  EXPECT_EQ(format_bytes(136, 2), "136 B");
  EXPECT_EQ(format_bytes(1023, 2), "1023 B");
  EXPECT_EQ(format_bytes(1024, 2), "1.00 KiB");
  EXPECT_EQ(format_bytes(68.0 * kKiB, 2), "68.00 KiB");
  EXPECT_EQ(format_bytes(768.0 * kMiB, 2), "768.00 MiB");
  EXPECT_EQ(format_bytes(4.0 * kGiB, 2), "4.00 GiB");
  EXPECT_EQ(format_bytes(1.125 * kGiB, 2), "1.12 GiB");
  EXPECT_EQ(format_bytes(2048.0 * kPiB, 2), "2048.00 PiB");
}

TEST(FormatBytes, SignificantDigitsAsTheReportsPrint) {
  EXPECT_EQ(format_bytes(136, 2, 3), "136 B");
  EXPECT_EQ(format_bytes(4.0 * kGiB, 2, 3), "4.00 GiB");
  EXPECT_EQ(format_bytes(68.0 * kKiB, 2, 3), "68.0 KiB");
  EXPECT_EQ(format_bytes(512.0 * kMiB, 2, 3), "512 MiB");
  EXPECT_EQ(format_bytes(9.999 * kKiB, 2, 3), "10.00 KiB");
  EXPECT_EQ(format_bytes(1000.0 * kKiB, 2, 3), "1000 KiB");
  EXPECT_EQ(format_bytes(68.0 * kKiB, 1, 4), "68.0 KiB");
}

}  // namespace
}  // namespace kvplan
