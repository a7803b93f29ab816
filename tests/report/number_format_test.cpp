#include "report/number_format.h"

#include <gtest/gtest.h>

namespace kvplan::report {
namespace {

TEST(NumberFormat, SignificantDigits) {
  EXPECT_EQ(format_significant(0.0987373894836349), "0.09874");
  EXPECT_EQ(format_significant(2.3604038256857054), "2.360");
  EXPECT_EQ(format_significant(17.83387363958434, 6), "17.8339");
  EXPECT_EQ(format_significant(3.083664480761408e-06), "3.084e-06");
  EXPECT_EQ(format_significant(0), "0");
  EXPECT_EQ(format_significant(1.0 / 0.0), "n/a");
}

TEST(NumberFormat, CountsRatiosPercent) {
  EXPECT_EQ(format_count(12960), "12,960");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(-1234567), "-1,234,567");
  EXPECT_EQ(format_ratio(3.2432432432432434), "3.24x");
  EXPECT_EQ(format_percent(0.8240963855421687), "82.41 %");
}

}  // namespace
}  // namespace kvplan::report
