#include "report/report_charts.h"

#include <gtest/gtest.h>

#include "report/report_fixtures.h"

namespace kvplan::test {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ReportCharts, FormatColoursGoFromMostBitsDown) {
  const report::ReportData d = tiny_report();
  const std::vector<report::FormatColor> colors = report::plan_format_colors(d.layers);
  ASSERT_EQ(colors.size(), 2u);
  EXPECT_EQ(colors[0].format, "int8");
  EXPECT_EQ(colors[1].format, "int4");
  EXPECT_EQ(colors[1].rgb.r, report::kSeriesColors[1].r);
}

TEST(ReportCharts, HeatmapOutlinesExactlyThePlansChoices) {
  const report::ReportData d = tiny_report();
  const report::Chart chart = report::heatmap_chart(d.dkl, d.layers);
  EXPECT_EQ(chart.id, "chart-heatmap-dkl");
  // One outline (series colour 4, vermillion #D55E00) per layer whose pair was profiled.
  EXPECT_EQ(count(chart.svg, "stroke=\"#D55E00\""), 2u);
  std::vector<report::LayerRow> unprofiled = d.layers;
  unprofiled[1].pair = KvPair::parse("KV2");
  EXPECT_EQ(count(report::heatmap_chart(d.dkl, unprofiled).svg, "stroke=\"#D55E00\""), 1u);
}

TEST(ReportCharts, ParetoMarksTheChosenPlanOnlyWhenItWasMeasured) {
  report::ReportData d = tiny_report();
  const std::string star = "&#x2605;";  // the chosen plan's mark (also in the legend)
  const size_t with_plan = count(report::pareto_chart(d).svg, star);
  d.plan_mean_kl.reset();
  EXPECT_EQ(count(report::pareto_chart(d).svg, star), with_plan - 1);
}

}  // namespace
}  // namespace kvplan::test
