// One chart as an SVG document, drawn with PLplot's built-in "svg" driver (Debian libplplot-dev).
//
// PLplot keeps its state in globals, so render_plplot_svg serialises all rendering behind one
// mutex and gives every chart a fresh PLplot stream with kvplan's colour map already set:
// colour 0 is the white background, 1 black (axes, text), 2.. the series colours of kSeriesColors.
// The driver writes no timestamps or random ids, so the same drawing gives the same bytes.
// PLplot ends the process on its internal fatal errors (plexit); the charts only pass it finite,
// validated values, and its recoverable errors (plabort) become an Error here.
//
//   std::string svg = kvplan::report::render_plplot_svg({640, 400}, [] {
//     plenv(0, 1, 0, 1, 0, 0);
//     pllab("x", "y", "title");
//   });
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace kvplan::report {

struct SvgPageSize {
  int width = 640;  // SVG user units (CSS pixels when inlined)
  int height = 400;
};

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

// Series colours, PLplot cmap0 indices 2..: Okabe & Ito's colour-blind-safe palette.
inline constexpr std::array<Rgb, 8> kSeriesColors = {{{0, 114, 178},
                                                      {230, 159, 0},
                                                      {0, 158, 115},
                                                      {204, 121, 167},
                                                      {213, 94, 0},
                                                      {86, 180, 233},
                                                      {240, 228, 66},
                                                      {120, 120, 120}}};
inline constexpr int kBackgroundColor = 0;
inline constexpr int kForegroundColor = 1;
inline constexpr int series_color(size_t i) {
  return 2 + static_cast<int>(i % kSeriesColors.size());
}

// A perceptually ordered map from 0 (dark purple) to 1 (yellow) for PLplot's cmap1, close to
// matplotlib's viridis at its control points; `heat_rgb` gives the same colour for HTML cells.
Rgb heat_rgb(double fraction);

// Runs `draw` on a fresh PLplot svg stream of the given size (plinit has been called; plend is
// called afterwards) and returns the SVG document PLplot wrote. Throws Error(kInternal) when PLplot
// reports an error (plabort) while drawing.
std::string render_plplot_svg(const SvgPageSize& size, const std::function<void()>& draw);

}  // namespace kvplan::report
