// The report's charts, drawn with PLplot (plplot_svg.h) and returned as inline SVG elements:
// the per-layer sensitivity heatmaps, the Pareto front with the uniform baselines, and the plan's
// K and V formats per layer.
//
//   kvplan::report::Chart c = kvplan::report::pareto_chart(data);
//   html += c.svg;
#pragma once

#include <string>
#include <vector>

#include "report/plplot_svg.h"
#include "report/report_data.h"

namespace kvplan::report {

struct Chart {
  std::string id;     // unique in the page; prefixes every id inside the SVG
  std::string title;  // the SVG's <title> and the figure caption
  std::string svg;    // an inline <svg> element
};

// Layers (rows, layer 0 on top) x candidate pairs (columns), log colour scale; the plan's chosen
// pair of each layer is outlined.
Chart heatmap_chart(const Heatmap& heatmap, const std::vector<LayerRow>& plan_layers);

// Memory (the plan's memory measure) against error (log scale): the search's front under the
// refit surrogate, the uniform baselines predicted and measured, the validated plans and the
// chosen plan.
Chart pareto_chart(const ReportData& data);

// One column per layer, K on top and V below, each cell coloured by its format.
Chart plan_chart(const ReportData& data);

// Format names of the plan in legend order (most bits first) and their colours, shared by the
// plan chart and the HTML tables so a format has one colour on the page.
struct FormatColor {
  std::string format;
  Rgb rgb;
};
std::vector<FormatColor> plan_format_colors(const std::vector<LayerRow>& layers);

}  // namespace kvplan::report
