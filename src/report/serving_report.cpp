#include "report/serving_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <plplot/plplot.h>

#include "core/error.h"
#include "core/format_bytes.h"
#include "report/plplot_svg.h"
#include "report/svg_inline.h"

namespace kvplan::report {
namespace {

constexpr SvgPageSize kChartSize{640, 360};

std::vector<std::string> labels_of(const std::vector<ServingRun>& runs) {
  std::vector<std::string> labels;
  for (const ServingRun& r : runs) {
    if (std::find(labels.begin(), labels.end(), r.kv) == labels.end()) labels.push_back(r.kv);
  }
  return labels;
}

// A legend in the chart's right margin: one coloured line per configuration.
void draw_legend(const std::vector<std::string>& labels) {
  plvpor(0.74, 0.99, 0.15, 0.9);
  plwind(0, 1, 0, 1);
  for (size_t i = 0; i < labels.size(); ++i) {
    const double y = 1.0 - (static_cast<double>(i) + 0.5) / 8.0;
    const PLFLT lx[2] = {0.02, 0.14}, ly[2] = {y, y};
    plcol0(series_color(i));
    plwidth(2);
    plline(2, lx, ly);
    plwidth(1);
    plcol0(kForegroundColor);
    plptex(0.18, y, 1, 0, 0, labels[i].c_str());
  }
}

std::string chart(const std::string& id, const std::string& title, const std::string& svg) {
  return fmt::format("<figure>{}<figcaption>{}</figcaption></figure>\n",
                     inline_svg(svg, id, title, kChartSize), html_escape(title));
}

// Fraction of the requests issued (not refused) whose TTFT is at most x (a request still waiting
// at the end counts its wait so far), per configuration, at one KV memory.
std::string ttft_cdf(const std::vector<ServingRun>& runs, uint64_t memory, size_t index,
                     const std::vector<std::string>& labels) {
  double most = 0;
  for (const ServingRun& r : runs) {
    if (r.kv_memory_bytes != memory) continue;
    for (const double t : r.ttft_s) most = std::max(most, t);
  }
  if (!(most > 0)) most = 1;
  uint64_t host = 0;
  for (const ServingRun& r : runs) {
    if (r.kv_memory_bytes == memory) host = r.host_memory_bytes;
  }
  const std::string title = fmt::format(
      "TTFT distribution at {} of KV memory{}", format_bytes(static_cast<double>(memory), 2, 3),
      host > 0 ? fmt::format(", {} host tier", format_bytes(static_cast<double>(host), 2, 3)) : "");
  const std::string svg = render_plplot_svg(kChartSize, [&] {
    pladv(0);
    plschr(0, 0.85);
    plvpor(0.1, 0.7, 0.15, 0.9);
    plwind(0, most * 1.05, 0, 1.02);
    plcol0(kForegroundColor);
    plbox("bcnstg", 0, 0, "bcnstvg", 0, 0);
    pllab("time to first token (s)", "fraction of requests issued", "");
    for (const ServingRun& r : runs) {
      if (r.kv_memory_bytes != memory || r.ttft_s.empty()) continue;
      std::vector<double> t = r.ttft_s;
      std::sort(t.begin(), t.end());
      // A step function: the fraction rises by 1/n at each request's TTFT.
      std::vector<PLFLT> x = {0}, y = {0};
      for (size_t i = 0; i < t.size(); ++i) {
        x.push_back(t[i]);
        y.push_back(static_cast<double>(i) / static_cast<double>(t.size()));
        x.push_back(t[i]);
        y.push_back(static_cast<double>(i + 1) / static_cast<double>(t.size()));
      }
      const size_t series =
          static_cast<size_t>(std::find(labels.begin(), labels.end(), r.kv) - labels.begin());
      plcol0(series_color(series));
      plwidth(2);
      plline(static_cast<PLINT>(x.size()), x.data(), y.data());
      plwidth(1);
    }
    draw_legend(labels);
  });
  return chart(fmt::format("ttft-{}", index), title, svg);
}

// One value per configuration against KV memory (MiB).
template <typename Value>
std::string sweep(const std::vector<ServingRun>& runs, const std::vector<std::string>& labels,
                  const std::string& id, const std::string& title, const std::string& y_label,
                  Value&& value) {
  bool host_scaled = false;
  for (const ServingRun& r : runs) host_scaled |= r.host_memory_bytes != runs[0].host_memory_bytes;
  const char* x_label =
      host_scaled ? "KV memory (MiB), host tier scaled with it" : "KV memory (MiB)";
  double x_lo = 1e300, x_hi = 0, y_hi = 0;
  for (const ServingRun& r : runs) {
    const double x = static_cast<double>(r.kv_memory_bytes) / (1 << 20);
    x_lo = std::min(x_lo, x);
    x_hi = std::max(x_hi, x);
    y_hi = std::max(y_hi, value(r));
  }
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  if (!(y_hi > 0)) y_hi = 1;
  const std::string svg = render_plplot_svg(kChartSize, [&] {
    pladv(0);
    plschr(0, 0.85);
    plvpor(0.1, 0.7, 0.15, 0.9);
    const double pad = 0.05 * (x_hi - x_lo);
    plwind(x_lo - pad, x_hi + pad, 0, y_hi * 1.1);
    plcol0(kForegroundColor);
    plbox("bcnstg", 0, 0, "bcnstvg", 0, 0);
    pllab(x_label, y_label.c_str(), "");
    for (size_t s = 0; s < labels.size(); ++s) {
      std::vector<PLFLT> x, y;
      for (const ServingRun& r : runs) {
        if (r.kv != labels[s]) continue;
        x.push_back(static_cast<double>(r.kv_memory_bytes) / (1 << 20));
        y.push_back(value(r));
      }
      plcol0(series_color(s));
      plwidth(2);
      if (x.size() > 1) plline(static_cast<PLINT>(x.size()), x.data(), y.data());
      plwidth(1);
      plstring(static_cast<PLINT>(x.size()), x.data(), y.data(), "\u25cf");
    }
    draw_legend(labels);
  });
  return chart(id, title, svg);
}

std::string table(const std::vector<ServingRun>& runs) {
  std::string h =
      "<table><thead><tr><th>KV</th><th>KV memory</th><th>host tier</th><th>B/token</th>"
      "<th>completed</th><th>waiting at the end</th>"
      "<th>TTFT p50</th><th>TTFT p95</th><th>TTFT p99</th><th>ITL</th><th>tokens/s</th>"
      "<th>computed</th><th>restored</th><th>served KL</th><th>top-1</th></tr></thead><tbody>\n";
  for (const ServingRun& r : runs) {
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.0f}</td><td>{} / {}</td><td>{}</td><td>{:.2f} "
        "s</td><td>{:.2f} "
        "s</td><td>{:.2f} s</td><td>{:.1f} ms</td><td>{:.2f}</td><td>{}</td><td>{}</td><td>{:.5f}"
        "</td><td>{:.1f} %</td></tr>\n",
        html_escape(r.kv), format_bytes(static_cast<double>(r.kv_memory_bytes), 2, 3),
        r.host_memory_bytes > 0 ? format_bytes(static_cast<double>(r.host_memory_bytes), 2, 3)
                                : std::string("-"),
        r.bytes_per_token, r.completed, r.requests, r.without_first_token, r.ttft_p50_s,
        r.ttft_p95_s, r.ttft_p99_s, 1000 * r.itl_mean_s, r.decode_tokens_per_s, r.computed_tokens,
        r.restored_tokens, r.served_mean_kl, 100 * r.served_top1);
  }
  return h + "</tbody></table>\n";
}

}  // namespace

std::string serving_html(const ServingReport& report) {
  if (report.runs.empty()) fail(ErrorCode::kInvalidArgument, "serving report: no runs");
  const std::vector<std::string> labels = labels_of(report.runs);
  std::vector<uint64_t> memories;
  for (const ServingRun& r : report.runs) {
    if (std::find(memories.begin(), memories.end(), r.kv_memory_bytes) == memories.end()) {
      memories.push_back(r.kv_memory_bytes);
    }
  }
  std::string h = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvplan bench serve: "
      "{0}</title>\n<style>body{{font-family:sans-serif;max-width:1100px;margin:1em auto;}}"
      "table{{border-collapse:collapse;font-size:0.85em}}td,th{{border:1px solid #ccc;padding:2px "
      "6px;text-align:right}}figure{{display:inline-block;margin:0.5em}}</style></head><body>\n"
      "<h1>Serving {0}</h1>\n<p>{1}</p>\n",
      html_escape(report.model), html_escape(report.workload));
  h += "<h2>Every run</h2>\n" + table(report.runs);
  h += "<h2>Time to first token</h2>\n";
  for (size_t i = 0; i < memories.size(); ++i) h += ttft_cdf(report.runs, memories[i], i, labels);
  if (memories.size() > 1) {
    h += "<h2>KV memory sweep</h2>\n";
    h += sweep(report.runs, labels, "sweep-completed", "Completed requests against KV memory",
               "completed requests", [](const ServingRun& r) { return double(r.completed); });
    h += sweep(report.runs, labels, "sweep-ttft", "p95 time to first token against KV memory",
               "TTFT p95 (s)", [](const ServingRun& r) { return r.ttft_p95_s; });
  }
  return h + "</body></html>\n";
}

}  // namespace kvplan::report
