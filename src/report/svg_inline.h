// Turns a standalone SVG document into an element that can sit inline in an HTML page next to
// other charts: the XML prolog and DOCTYPE go, every id gets a per-chart prefix (PLplot names its
// clip paths "text-clipping0" in every chart, and duplicate ids would make one chart clip with
// another's path), and the root gets its pixel size, a class and an accessible title.
//
//   std::string html_svg = kvplan::report::inline_svg(svg, "pareto", "Pareto front", {640, 400});
#pragma once

#include <string>
#include <string_view>

#include "report/plplot_svg.h"

namespace kvplan::report {

// Throws Error(kInternal) when `svg` has no <svg> root element.
std::string inline_svg(std::string_view svg, std::string_view id_prefix, std::string_view title,
                       const SvgPageSize& size);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(std::string_view text);

}  // namespace kvplan::report
