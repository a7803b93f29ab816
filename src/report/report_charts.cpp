#include "report/report_charts.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <plplot/plplot.h>

#include "report/number_format.h"
#include "report/svg_inline.h"

namespace kvplan::report {
namespace {

// cmap0 entry re-coloured before each heatmap cell / format box is filled.
constexpr int kScratchColor = 15;
constexpr double kLog10Floor = -12;  // log10 of the smallest error drawn (0 has no log)

double as_double(size_t v) {
  return static_cast<double>(v);
}

double log10_or_floor(double v) {
  return v > 0 ? std::max(std::log10(v), kLog10Floor) : kLog10Floor;
}

void fill_rect(double x0, double y0, double x1, double y1, Rgb rgb) {
  plscol0(kScratchColor, rgb.r, rgb.g, rgb.b);
  plcol0(kScratchColor);
  const PLFLT xs[4] = {x0, x1, x1, x0};
  const PLFLT ys[4] = {y0, y0, y1, y1};
  plfill(4, xs, ys);
}

void outline_rect(double x0, double y0, double x1, double y1) {
  const PLFLT xs[5] = {x0, x1, x1, x0, x0};
  const PLFLT ys[5] = {y0, y0, y1, y1, y0};
  plline(5, xs, ys);
}

// Pads a [lo, hi] range by a fraction of its width (or by a unit when it is a single value).
std::pair<double, double> padded(double lo, double hi, double fraction, double unit) {
  if (hi - lo < 1e-12) return {lo - unit, hi + unit};
  const double pad = (hi - lo) * fraction;
  return {lo - pad, hi + pad};
}

// Light grey for grid lines, so the data stay in front.
constexpr int kGridColor = 14;

struct LegendEntry {
  std::string label;
  int color = kForegroundColor;
  std::string symbol;  // a glyph drawn with plstring; empty: a filled box of `box` colour
  bool line = false;   // a line through the symbol
  Rgb box;
};

// A legend of one column (rows = entries) or one row, drawn into the page fraction
// [x0, x1] x [y0, y1]. PLplot's pllegend places itself relative to the plot's viewport and can
// run off the page; this one stays where it is put.
void draw_legend(const std::vector<LegendEntry>& entries, double x0, double x1, double y0,
                 double y1, bool as_row) {
  if (entries.empty()) return;
  plvpor(x0, x1, y0, y1);
  plwind(0, 1, 0, 1);
  const double n = as_double(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& e = entries[i];
    // Cell of this entry in window coordinates: the mark at its left, the text after it.
    const double cx = as_row ? as_double(i) / n : 0.0;
    const double cw = as_row ? 1.0 / n : 1.0;
    const double cy = as_row ? 0.5 : 1.0 - (as_double(i) + 0.5) / n;
    const double mark = as_row ? 0.25 * cw : 0.12;
    const double half_height = as_row ? 0.3 : 0.3 / n;
    if (e.symbol.empty()) {
      fill_rect(cx + 0.02 * cw, cy - half_height, cx + mark, cy + half_height, e.box);
    } else {
      plcol0(e.color);
      if (e.line) {
        const PLFLT lx[2] = {cx + 0.01, cx + mark}, ly[2] = {cy, cy};
        plline(2, lx, ly);
      }
      const PLFLT sx = cx + mark / 2, sy = cy;
      plstring(1, &sx, &sy, e.symbol.c_str());
    }
    plcol0(kForegroundColor);
    plptex(cx + mark + 0.03 * cw, cy, 1, 0, 0, e.label.c_str());
  }
}

// Heatmap rows need about 16 px each to keep the layer labels legible.
SvgPageSize heatmap_size(size_t n_layers) {
  return {560, std::max(320, 120 + 16 * static_cast<int>(n_layers))};
}

}  // namespace

std::vector<FormatColor> plan_format_colors(const std::vector<LayerRow>& layers) {
  std::map<std::pair<double, std::string>, int> order;  // (-bits, name)
  for (const LayerRow& l : layers) {
    for (const KvPair& p : l.heads.empty() ? std::vector<KvPair>{l.pair} : l.heads) {
      for (const Format& f : {p.key, p.value}) {
        order.emplace(std::pair{-f.info().bits * 1.0, f.name()}, 0);
      }
    }
  }
  std::vector<FormatColor> colors;
  for (const auto& [key, unused] : order) {
    colors.push_back({key.second, kSeriesColors[colors.size() % kSeriesColors.size()]});
  }
  return colors;
}

Chart heatmap_chart(const Heatmap& h, const std::vector<LayerRow>& plan_layers) {
  Chart chart;
  chart.id = "chart-heatmap-" + std::string(h.metric == "dKL" ? "dkl" : "eo");
  chart.title = fmt::format("Per-layer sensitivity: {} by candidate pair", h.metric);
  const size_t n_layers = h.values.size();
  const size_t n_pairs = h.candidates.size();
  double lo = 0, hi = 0;
  bool first = true;
  for (const auto& row : h.values) {
    for (double v : row) {
      const double lv = log10_or_floor(v);
      lo = first ? lv : std::min(lo, lv);
      hi = first ? lv : std::max(hi, lv);
      first = false;
    }
  }
  if (hi - lo < 1e-9) hi = lo + 1;
  const SvgPageSize size = heatmap_size(n_layers);
  const std::string svg = render_plplot_svg(size, [&] {
    pladv(0);
    plschr(0, 0.95);
    plvpor(0.14, 0.76, 0.10, 0.90);
    plwind(0, static_cast<double>(n_pairs), static_cast<double>(n_layers), 0);
    for (size_t l = 0; l < n_layers; ++l) {
      for (size_t c = 0; c < n_pairs; ++c) {
        const double f = (log10_or_floor(h.values[l][c]) - lo) / (hi - lo);
        fill_rect(as_double(c), as_double(l), as_double(c + 1), as_double(l + 1), heat_rgb(f));
      }
    }
    // The plan's choice of each layer.
    plcol0(series_color(4));
    plwidth(2.5);
    for (const LayerRow& row : plan_layers) {
      const auto it = std::find(h.candidates.begin(), h.candidates.end(), row.pair.name());
      if (it == h.candidates.end() || row.index < 0 || static_cast<size_t>(row.index) >= n_layers) {
        continue;
      }
      const double c = static_cast<double>(it - h.candidates.begin());
      outline_rect(c + 0.06, row.index + 0.08, c + 0.94, row.index + 0.92);
    }
    plwidth(1);
    plcol0(kForegroundColor);
    plbox("bc", 0, 0, "bc", 0, 0);
    for (size_t c = 0; c < n_pairs; ++c) {
      plmtex("b", 1.2, (as_double(c) + 0.5) / as_double(n_pairs), 0.5, h.candidates[c].c_str());
    }
    const size_t step = n_layers > 40 ? 5 : n_layers > 20 ? 2 : 1;
    for (size_t l = 0; l < n_layers; l += step) {
      plmtex("lv", 0.8, 1.0 - (as_double(l) + 0.5) / as_double(n_layers), 1.0,
             std::to_string(l).c_str());
    }
    plmtex("b", 3.0, 0.5, 0.5, "candidate pair (key, value)");
    plmtex("l", 3.4, 0.5, 0.5, "layer");
    plmtex("t", 1.2, 0.5, 0.5,
           fmt::format("{} (log colour scale); outlined: the plan's choice", h.metric).c_str());
    // Colour scale.
    plvpor(0.82, 0.85, 0.10, 0.90);
    plwind(0, 1, lo, hi);
    constexpr int kSteps = 48;
    for (int i = 0; i < kSteps; ++i) {
      const double y0 = lo + (hi - lo) * i / kSteps, y1 = lo + (hi - lo) * (i + 1) / kSteps;
      fill_rect(0, y0, 1, y1, heat_rgb((i + 0.5) / kSteps));
    }
    plcol0(kForegroundColor);
    plbox("bc", 0, 0, "bcmstlv", 0, 0);
  });
  chart.svg = inline_svg(svg, chart.id, chart.title, size);
  return chart;
}

Chart pareto_chart(const ReportData& d) {
  Chart chart;
  chart.id = "chart-pareto";
  chart.title = "Pareto front and uniform baselines";
  const bool by_bits = d.memory_measure != "bytes_per_token";
  std::vector<double> xs, ys;
  auto consider = [&](double x, double y) {
    xs.push_back(x);
    ys.push_back(log10_or_floor(y));
  };
  for (const FrontPoint& f : d.front) consider(f.memory, f.predicted_error);
  for (const BaselinePoint& b : d.baselines) {
    consider(b.memory, b.mean_kl);
    if (b.predicted_error) consider(b.memory, *b.predicted_error);
  }
  for (const ValidationPoint& v : d.validations) consider(v.memory, v.mean_kl);
  const double plan_memory = by_bits ? d.summary.equivalent_bits : d.summary.bytes_per_token;
  if (d.plan_mean_kl) consider(plan_memory, *d.plan_mean_kl);
  if (xs.empty()) consider(plan_memory, 1);
  // Extra room on the right for the baselines' names, which are written right of their marks.
  const auto [x_lo, x_hi_padded] =
      padded(*std::min_element(xs.begin(), xs.end()), *std::max_element(xs.begin(), xs.end()), 0.06,
             by_bits ? 0.5 : 64);
  const double x_hi = x_hi_padded + 0.22 * (x_hi_padded - x_lo);
  const auto [y_lo, y_hi] = padded(*std::min_element(ys.begin(), ys.end()),
                                   *std::max_element(ys.begin(), ys.end()), 0.08, 0.5);

  const SvgPageSize size{760, 460};
  const std::string svg = render_plplot_svg(size, [&] {
    pladv(0);
    plschr(0, 0.85);
    plvpor(0.11, 0.66, 0.12, 0.90);
    plwind(x_lo, x_hi, y_lo, y_hi);
    plscol0(kGridColor, 220, 220, 220);
    plcol0(kGridColor);
    plbox("g", 0, 0, "gl", 0, 0);
    plcol0(kForegroundColor);
    plbox("bcnst", 0, 0, "bcnstlv", 0, 0);
    pllab(by_bits ? "equivalent bits (mean over layers of (k_bits + v_bits) / 2)"
                  : "KV bytes per token",
          "", "");
    plmtex("l", 4.2, 0.5, 0.5, "error (log scale)");

    // Exact front of the additive surrogate (a line), in memory order; NSGA-II's front of the
    // corrected surrogate as crosses.
    std::vector<PLFLT> fx, fy, nx, ny;
    for (const FrontPoint& f : d.front) {
      (f.source == "nsga2" ? nx : fx).push_back(f.memory);
      (f.source == "nsga2" ? ny : fy).push_back(log10_or_floor(f.predicted_error));
    }
    plcol0(series_color(0));
    if (fx.size() > 1) plline(static_cast<PLINT>(fx.size()), fx.data(), fy.data());
    if (!fx.empty() && fx.size() <= 64) {
      plstring(static_cast<PLINT>(fx.size()), fx.data(), fy.data(), "\u2022");
    }
    plcol0(series_color(3));
    if (!nx.empty()) plstring(static_cast<PLINT>(nx.size()), nx.data(), ny.data(), "\u00d7");
    // Uniform baselines under the same surrogate.
    for (const BaselinePoint& b : d.baselines) {
      if (!b.predicted_error) continue;
      const PLFLT x = b.memory, y = log10_or_floor(*b.predicted_error);
      plstring(1, &x, &y, "\u25a1");
    }
    // Validated plans, measured.
    plcol0(series_color(1));
    for (const ValidationPoint& v : d.validations) {
      const PLFLT x = v.memory, y = log10_or_floor(v.mean_kl);
      plstring(1, &x, &y, "\u25cf");
    }
    // Uniform baselines, measured, with their names.
    plcol0(series_color(2));
    for (const BaselinePoint& b : d.baselines) {
      const PLFLT x = b.memory, y = log10_or_floor(b.mean_kl);
      plstring(1, &x, &y, "\u25a0");
      plptex(x + (x_hi - x_lo) * 0.012, y, 1, 0, 0, b.kv.c_str());
    }
    // The chosen plan.
    if (d.plan_mean_kl) {
      plcol0(series_color(4));
      plschr(0, 1.6);
      const PLFLT x = plan_memory, y = log10_or_floor(*d.plan_mean_kl);
      plstring(1, &x, &y, "\u2605");
      plschr(0, 0.85);
    }

    plschr(0, 0.85);
    draw_legend({{"exact front, predicted", series_color(0), "\u2022", true, {}},
                 {"NSGA-II front, predicted", series_color(3), "\u00d7", false, {}},
                 {"uniform, predicted", series_color(0), "\u25a1", false, {}},
                 {"validated plans, selection text", series_color(1), "\u25cf", false, {}},
                 {"uniform, report text", series_color(2), "\u25a0", false, {}},
                 {"chosen plan, report text", series_color(4), "\u2605", false, {}}},
                0.70, 0.99, 0.55, 0.90, false);
  });
  chart.svg = inline_svg(svg, chart.id, chart.title, size);
  return chart;
}

Chart plan_chart(const ReportData& d) {
  Chart chart;
  chart.id = "chart-plan-layers";
  chart.title = "The plan: key and value format per layer";
  const size_t n = d.layers.size();
  const std::vector<FormatColor> colors = plan_format_colors(d.layers);
  const auto color_of = [&](const Format& f) {
    for (const FormatColor& c : colors) {
      if (c.format == f.name()) return c.rgb;
    }
    return Rgb{200, 200, 200};
  };
  const SvgPageSize size{std::max(520, 110 + 22 * static_cast<int>(n)), 230};
  const std::string svg = render_plplot_svg(size, [&] {
    pladv(0);
    plschr(0, 1.0);
    const double right = 1.0 - 30.0 / size.width;
    plvpor(70.0 / size.width, right, 0.40, 0.88);
    plwind(0, static_cast<double>(n), 0, 2);
    for (size_t l = 0; l < n; ++l) {
      // A per-KV-head layer: one sub-column per head.
      const std::vector<KvPair> heads =
          d.layers[l].heads.empty() ? std::vector<KvPair>{d.layers[l].pair} : d.layers[l].heads;
      const double w = 1.0 / static_cast<double>(heads.size());
      for (size_t h = 0; h < heads.size(); ++h) {
        const double x0 = as_double(l) + w * as_double(h), x1 = x0 + w;
        fill_rect(x0, 1, x1, 2, color_of(heads[h].key));
        fill_rect(x0, 0, x1, 1, color_of(heads[h].value));
      }
      plcol0(kBackgroundColor);
      const PLFLT sx[2] = {as_double(l), as_double(l)}, sy[2] = {0, 2};
      plline(2, sx, sy);
      plcol0(kForegroundColor);
      // Bits per side; "h" where the layer's heads differ in bits.
      const auto bits_label = [&](bool keys) {
        const auto bits = [&](const KvPair& p) { return (keys ? p.key : p.value).info().bits; };
        for (const KvPair& p : heads) {
          if (bits(p) != bits(heads.front())) return std::string("h");
        }
        return fmt::format("{}", bits(heads.front()));
      };
      plptex(as_double(l) + 0.5, 1.42, 1, 0, 0.5, bits_label(true).c_str());
      plptex(as_double(l) + 0.5, 0.42, 1, 0, 0.5, bits_label(false).c_str());
    }
    plcol0(kForegroundColor);
    plbox("bc", 0, 0, "bc", 0, 0);
    const size_t step = n > 40 ? 5 : n > 20 ? 2 : 1;
    for (size_t l = 0; l < n; l += step) {
      plmtex("b", 1.2, (as_double(l) + 0.5) / as_double(n), 0.5, std::to_string(l).c_str());
    }
    plmtex("lv", 1.0, 0.75, 1.0, "K");
    plmtex("lv", 1.0, 0.25, 1.0, "V");
    plmtex("b", 2.4, 0.5, 0.5, "layer");
    plmtex("t", 1.0, 0.5, 0.5, "bits per value in each cell");
    std::vector<LegendEntry> legend;
    for (const FormatColor& c : colors) legend.push_back({c.format, 0, "", false, c.rgb});
    draw_legend(legend, 70.0 / size.width,
                std::min(right, (70.0 + 110.0 * as_double(colors.size())) / size.width), 0.02, 0.14,
                true);
  });
  chart.svg = inline_svg(svg, chart.id, chart.title, size);
  return chart;
}

}  // namespace kvplan::report
