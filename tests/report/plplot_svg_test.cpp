#include "report/plplot_svg.h"

#include <gtest/gtest.h>
#include <plplot/plplot.h>

namespace kvplan::report {
namespace {

std::string line_chart(double slope) {
  return render_plplot_svg({320, 200}, [slope] {
    plenv(0, 10, 0, 10, 0, 0);
    const PLFLT x[2] = {0, 10}, y[2] = {0, 10 * slope};
    plcol0(series_color(1));
    plline(2, x, y);
    pllab("x", "y", "line");
  });
}

TEST(PlplotSvg, DrawsAnSvgDocumentWithTheSeriesColour) {
  const std::string svg = line_chart(0.5);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("viewBox=\"0 0 320 200\""), std::string::npos) << svg.substr(0, 400);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("#E69F00"), std::string::npos) << "series colour 1 (Okabe-Ito orange)";
  EXPECT_NE(svg.find("fill=\"#FFFFFF\""), std::string::npos) << "white background";
}

TEST(PlplotSvg, SameDrawingSameBytesAndDifferentDrawingDifferentBytes) {
  EXPECT_EQ(line_chart(0.5), line_chart(0.5));
  EXPECT_NE(line_chart(0.5), line_chart(0.9));
}

TEST(PlplotSvg, ReportsPlplotErrorsInsteadOfIgnoringThem) {
  // plenv refuses an empty x range through plabort.
  EXPECT_ANY_THROW((void)render_plplot_svg({100, 100}, [] { plenv(1, 1, 0, 1, 0, 0); }));
}

TEST(HeatRgb, FollowsViridisAtItsControlPointsAndClamps) {
  const auto eq = [](Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; };
  EXPECT_TRUE(eq(heat_rgb(0), Rgb{68, 1, 84}));
  EXPECT_TRUE(eq(heat_rgb(0.5), Rgb{33, 145, 140}));
  EXPECT_TRUE(eq(heat_rgb(1), Rgb{253, 231, 37}));
  EXPECT_TRUE(eq(heat_rgb(-3), heat_rgb(0)));
  EXPECT_TRUE(eq(heat_rgb(7), heat_rgb(1)));
  // Halfway between the 0.75 and 1.0 stops.
  EXPECT_TRUE(eq(heat_rgb(0.875), Rgb{174, 216, 68})) << int(heat_rgb(0.875).r);
}

}  // namespace
}  // namespace kvplan::report
