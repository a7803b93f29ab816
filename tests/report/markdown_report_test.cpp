#include "reports/src/markdown_report.h"

#include <gtest/gtest.h>

#include "report/report_fixtures.h"

namespace kvplan::test {
namespace {

TEST(MarkdownReport, TablesForEverySectionAndTheChoiceInBold) {
  const std::string md = report::markdown_report(tiny_report());
  EXPECT_EQ(md.rfind("# kvplan report: tiny <model> & co\n", 0), 0u);
  for (const char* heading :
       {"## The plan, per layer", "## Per-layer sensitivity",
        "## Pareto front and uniform baselines", "## Memory", "## Validation", "## Provenance"}) {
    EXPECT_NE(md.find(heading), std::string::npos) << heading;
  }
  // Layer 1 chose KV4, whose dKL is 0.4: bold in the dKL table.
  EXPECT_NE(md.find("| 1 | 2.00e-04 | 0.00500 | **0.400** |"), std::string::npos) << md;
  EXPECT_NE(md.find("| **plan** | 6.000 | 112 | 2.29x |"), std::string::npos) << md;
  EXPECT_EQ(md.find("<svg"), std::string::npos);
  EXPECT_EQ(md, report::markdown_report(tiny_report()));
}

}  // namespace
}  // namespace kvplan::test
