#include "report/plplot_svg.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <string>

#include <plplot/plplot.h>

#include "core/error.h"
#include "core/file_io.h"

namespace kvplan::report {
namespace {

// PLplot's state is process-global: one chart at a time.
std::mutex& plplot_mutex() {
  static std::mutex m;
  return m;
}

// plabort() messages of the chart being drawn (PLplot reports recoverable errors through this
// hook and carries on; we turn them into an Error after the chart is finished).
std::string& abort_messages() {
  static std::string messages;
  return messages;
}

extern "C" void record_plplot_abort(PLCHAR_VECTOR message) {
  if (!abort_messages().empty()) abort_messages() += "; ";
  abort_messages() += message;
}

struct ViridisStop {
  double at;
  Rgb rgb;
};
// matplotlib's viridis sampled at five points (its published table).
constexpr std::array<ViridisStop, 5> kViridis = {{{0.00, {68, 1, 84}},
                                                  {0.25, {59, 82, 139}},
                                                  {0.50, {33, 145, 140}},
                                                  {0.75, {94, 201, 98}},
                                                  {1.00, {253, 231, 37}}}};

uint8_t mix(uint8_t a, uint8_t b, double t) {
  return static_cast<uint8_t>(std::lround(a + (b - a) * t));
}

}  // namespace

Rgb heat_rgb(double fraction) {
  const double f = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  for (size_t i = 1; i < kViridis.size(); ++i) {
    if (f <= kViridis[i].at) {
      const ViridisStop& lo = kViridis[i - 1];
      const ViridisStop& hi = kViridis[i];
      const double t = (f - lo.at) / (hi.at - lo.at);
      return {mix(lo.rgb.r, hi.rgb.r, t), mix(lo.rgb.g, hi.rgb.g, t), mix(lo.rgb.b, hi.rgb.b, t)};
    }
  }
  return kViridis.back().rgb;
}

std::string render_plplot_svg(const SvgPageSize& size, const std::function<void()>& draw) {
  const std::lock_guard<std::mutex> lock(plplot_mutex());
  static int chart_counter = 0;
  // PLplot's svg driver writes to a file; a private temporary one, read back and removed.
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("kvplan-chart-" + std::to_string(::getpid()) + "-" +
                                                std::to_string(chart_counter++) + ".svg");
  abort_messages().clear();

  PLINT stream = 0;
  plmkstrm(&stream);
  if (stream < 0) fail(ErrorCode::kInternal, "PLplot: no free plot stream");
  plsabort(record_plplot_abort);
  plsdev("svg");
  plsfnam(file.c_str());
  plspage(0, 0, size.width, size.height, 0, 0);
  plscmap0n(16);
  plscol0(kBackgroundColor, 255, 255, 255);
  plscol0(kForegroundColor, 0, 0, 0);
  for (size_t i = 0; i < kSeriesColors.size(); ++i) {
    const Rgb c = kSeriesColors[i];
    plscol0(series_color(i), c.r, c.g, c.b);
  }
  plinit();
  plcol0(kForegroundColor);
  draw();
  plend1();

  std::string svg;
  std::error_code ignored;
  try {
    svg = read_text_file(file);
  } catch (...) {
    std::filesystem::remove(file, ignored);
    throw;
  }
  std::filesystem::remove(file, ignored);
  if (!abort_messages().empty()) {
    fail(ErrorCode::kInternal, "PLplot reported: {}", abort_messages());
  }
  return svg;
}

}  // namespace kvplan::report
