#include "report/html_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/format_bytes.h"
#include "report/number_format.h"
#include "report/report_charts.h"
#include "report/report_text.h"
#include "report/svg_inline.h"

namespace kvplan::report {
namespace {

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #111; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f2f2f2; } td.l, th.l { text-align: left; }
tr.plan td { font-weight: bold; background: #fff7e6; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #444; max-width: 760px; }
svg.chart { max-width: 100%; height: auto; border: 1px solid #eee; }
.warning { background: #fff0f0; border-left: 4px solid #d55e00; padding: 0.5em 1em; }
.fmt { color: #fff; text-shadow: 0 0 2px #000; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; font-size: 0.9em; }
dl.facts dt { font-weight: bold; } dl.facts dd { margin: 0; }
)";

std::string esc(std::string_view s) {
  return html_escape(s);
}

std::string css_color(const Rgb& c) {
  return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
}

std::string figure(const Chart& chart, std::string_view caption) {
  return fmt::format("<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>\n", chart.svg,
                     esc(caption));
}

std::string facts(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = "<dl class=\"facts\">\n";
  for (const auto& [label, value] : rows) {
    out += fmt::format("<dt>{}</dt><dd>{}</dd>\n", esc(label), esc(value));
  }
  return out + "</dl>\n";
}

std::string format_cell(const Format& f, const std::vector<FormatColor>& colors) {
  for (const FormatColor& c : colors) {
    if (c.format == f.name()) {
      return fmt::format("<td class=\"l fmt\" style=\"background:{}\">{}</td>", css_color(c.rgb),
                         esc(f.name()));
    }
  }
  return fmt::format("<td class=\"l\">{}</td>", esc(f.name()));
}

std::string plan_table(const ReportData& d) {
  const std::vector<FormatColor> colors = plan_format_colors(d.layers);
  std::string out =
      "<table>\n<tr><th>layer</th><th>group</th><th class=\"l\">K</th><th class=\"l\">V</th>"
      "<th>K B/token</th><th>V B/token</th><th>dKL of this pair</th><th>e_o of this pair</th>"
      "<th>surrogate weight</th></tr>\n";
  for (const LayerRow& l : d.layers) {
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td>{}{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        l.index, l.group,
        l.heads.empty() ? format_cell(l.pair.key, colors)
                        : fmt::format("<td class=\"l\">{}</td>", esc(l.side_text(true))),
        l.heads.empty() ? format_cell(l.pair.value, colors)
                        : fmt::format("<td class=\"l\">{}</td>", esc(l.side_text(false))),
        format_significant(l.key_bytes_per_token, 4),
        format_significant(l.value_bytes_per_token, 4), optional_significant(l.dkl),
        optional_significant(l.e_o), optional_significant(l.surrogate_weight));
  }
  return out + "</table>\n";
}

std::string front_table(const ReportData& d) {
  const std::vector<size_t> shown = front_rows_shown(d.front);
  std::string out;
  if (shown.size() < d.front.size()) {
    out +=
        fmt::format("<p>{} of {} front points shown (evenly spaced, and every measured one).</p>\n",
                    shown.size(), d.front.size());
  }
  out +=
      "<table>\n<tr><th class=\"l\">front</th><th>equivalent bits</th><th>B/token</th>"
      "<th>predicted error</th><th>measured mean KL</th></tr>\n";
  for (const size_t i : shown) {
    const FrontPoint& f = d.front[i];
    out += fmt::format(
        "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        esc(f.source.empty() ? "search" : f.source), format_significant(f.equivalent_bits, 4),
        format_count(static_cast<int64_t>(std::llround(f.bytes_per_token))),
        format_significant(f.predicted_error), optional_significant(f.mean_kl));
  }
  return out + "</table>\n";
}

std::string baseline_table(const ReportData& d) {
  // Plans that record why each baseline was measured get a column for it.
  const bool reasons =
      std::any_of(d.baselines.begin(), d.baselines.end(),
                  [](const BaselinePoint& b) { return !b.measured_because.empty(); });
  std::string out =
      "<table>\n<tr><th class=\"l\">KV</th><th>equivalent bits</th><th>B/token</th>"
      "<th>within budget</th><th>mean KL</th><th>top-1</th><th>PPL</th>"
      "<th>surrogate prediction</th><th>plan - baseline KL [95 % CI]</th>";
  out += reasons ? "<th class=\"l\">measured because</th></tr>\n" : "</tr>\n";
  if (d.plan_mean_kl) {
    out += fmt::format(
        "<tr class=\"plan\"><td class=\"l\">plan</td><td>{}</td><td>{}</td><td>yes</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td></td>{}</tr>\n",
        format_significant(d.summary.equivalent_bits, 4),
        format_count(static_cast<int64_t>(d.summary.bytes_per_token)),
        format_significant(*d.plan_mean_kl), d.plan_top1 ? format_percent(*d.plan_top1) : "n/a",
        optional_significant(d.plan_ppl, 6), optional_significant(d.plan_predicted),
        reasons ? "<td></td>" : "");
  }
  for (const BaselinePoint& b : d.baselines) {
    out += fmt::format(
        "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td>{}</tr>\n",
        esc(b.kv), format_significant(b.equivalent_bits, 4),
        format_count(static_cast<int64_t>(b.bytes_per_token)), b.within_budget ? "yes" : "no",
        format_significant(b.mean_kl), format_percent(b.top1_agreement),
        format_significant(b.ppl, 6), optional_significant(b.predicted_error),
        esc(kl_difference_text(b)),
        reasons ? "<td class=\"l\">" + esc(b.measured_because) + "</td>" : std::string());
  }
  return out + "</table>\n";
}

std::string validation_table(const ReportData& d) {
  std::string out =
      "<table>\n<tr><th>round</th><th>memory</th><th>predicted error</th><th>measured mean KL</th>"
      "</tr>\n";
  for (const ValidationPoint& v : d.validations) {
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", v.round,
                       format_significant(v.memory, 4), format_significant(v.predicted_error),
                       format_significant(v.mean_kl));
  }
  return out + "</table>\n";
}

std::string long_context_table(const ReportData& d) {
  std::string out =
      "<table>\n<tr><th>ctx</th><th>chunks</th><th>scored positions</th><th>plan mean KL</th>"
      "<th>baseline mean KL</th><th>plan / baseline</th></tr>\n";
  for (const LongContextRow& p : d.long_context) {
    out +=
        fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                    format_count(p.ctx), p.chunks, format_count(p.scored),
                    format_significant(p.plan_mean_kl), format_significant(p.baseline_mean_kl),
                    format_significant(p.plan_mean_kl / p.baseline_mean_kl, 3));
  }
  return out + "</table>\n";
}

std::string engine_table(const ReportData& d) {
  std::string out =
      "<table>\n<tr><th class=\"l\">engine</th><th class=\"l\">layer structure</th>"
      "<th>B/token</th><th>mean KL</th><th>top-1</th><th class=\"l\">best uniform</th>"
      "<th>plan - best uniform [95 % CI]</th></tr>\n";
  for (const EnginePlanRow& e : d.engine_plans) {
    out += fmt::format(
        "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td class=\"l\">{}</td><td>{}</td></tr>\n",
        esc(e.engine), esc(e.structure), fmt::format("{:.0f}", e.bytes_per_token),
        e.mean_kl ? format_significant(*e.mean_kl) : "-",
        e.top1 ? fmt::format("{:.2f} %", 100 * *e.top1) : "-",
        e.best_uniform_kl
            ? esc(fmt::format("{} ({})", e.best_uniform, format_significant(*e.best_uniform_kl)))
            : "-",
        e.diff ? fmt::format("{:+.4f} [{:+.4f}, {:+.4f}]", *e.diff, *e.diff_low, *e.diff_high)
               : "-");
  }
  return out + "</table>\n";
}

std::string memory_table(const ReportData& d) {
  std::string out =
      "<table>\n<tr><th class=\"l\">KV</th><th>equivalent bits</th><th>B/token</th>"
      "<th>vs bf16</th>";
  for (int64_t t : d.memory.contexts) {
    out += fmt::format("<th>{}: bytes per sequence</th><th>{}: sequences that fit</th>",
                       context_heading(t), context_heading(t));
  }
  out += "<th>longest context that fits</th></tr>\n";
  for (const MemoryRow& r : d.memory_rows) {
    out += fmt::format("<tr{}><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>",
                       r.is_plan ? " class=\"plan\"" : "", esc(r.label),
                       format_significant(r.equivalent_bits, 4),
                       format_count(static_cast<int64_t>(std::llround(r.bytes_per_token))),
                       format_ratio(r.compression_vs_bf16));
    for (size_t i = 0; i < d.memory.contexts.size(); ++i) {
      out += fmt::format("<td>{}</td><td>{}</td>",
                         format_bytes(static_cast<double>(r.bytes_per_sequence[i]), 2, 3),
                         fit_cell(r.sequences_that_fit[i], d.memory.contexts[i]));
    }
    out += fmt::format("<td>{}</td></tr>\n", format_count(r.longest_context));
  }
  return out + "</table>\n";
}

}  // namespace

std::string html_report(const ReportData& d) {
  const std::string title = fmt::format("kvplan report: {}", d.model.name);
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", esc(title), kStyle);
  h += fmt::format("<h1>{}</h1>\n", esc(title));
  h += fmt::format("<p>{}</p>\n<p><strong>{}</strong></p>\n", esc(model_line(d)),
                   esc(summary_line(d)));
  for (const std::string& w : d.warnings) h += fmt::format("<p class=\"warning\">{}</p>\n", esc(w));

  h += "<h2 id=\"plan\">The plan, per layer</h2>\n";
  h += figure(plan_chart(d),
              "Key (K) and value (V) format of every layer; the number is the format's bits per "
              "value. Groups are the layer clusters the search assigned formats to.");
  h += plan_table(d);

  h += "<h2 id=\"sensitivity\">Per-layer sensitivity</h2>\n";
  h += fmt::format(
      "<p>From {}: every layer quantized alone with every candidate pair, "
      "real packed formats. dKL: {}. e_o: {}.</p>\n",
      esc(d.profile_file), esc(d.dkl.description), esc(d.e_o.description));
  h += figure(heatmap_chart(d.dkl, d.layers),
              "dKL per layer and candidate pair; the outlined cell is the plan's choice.");
  h += figure(heatmap_chart(d.e_o, d.layers),
              "e_o per layer and candidate pair; the outlined cell is the plan's choice.");

  h += "<h2 id=\"pareto\">Pareto front and uniform baselines</h2>\n";
  h += figure(pareto_chart(d),
              "The exact front of the additive surrogate (line) and NSGA-II's front of the "
              "corrected surrogate (crosses), refit on real validations (predicted error); "
              "validated plans are mean KL(exact || quantized) measured on the selection text, "
              "the chosen plan and the uniform baselines on the report text.");
  h += front_table(d);

  h += "<h2 id=\"memory\">Memory</h2>\n";
  h += fmt::format(
      "<p>KV-cache bytes by the plan's layout (page of {} tokens), one sequence per context; "
      "'fits' is in {} of GPU memory{}.</p>\n",
      d.quantization.block_size,
      esc(format_bytes(static_cast<double>(d.memory.gpu_memory_bytes), 2, 3)),
      d.memory.weights_bytes
          ? fmt::format(" less {} of weights",
                        esc(format_bytes(static_cast<double>(d.memory.weights_bytes), 2, 3)))
          : std::string());
  if (!d.sliding_window_note.empty()) h += "<p>" + esc(d.sliding_window_note) + "</p>\n";
  h += memory_table(d);

  h += "<h2 id=\"validation\">Validation</h2>\n";
  h += facts(d.validation_facts);
  h += "<p>The plan and the uniform baselines, measured the same way:</p>\n";
  h += baseline_table(d);
  if (!d.validations.empty()) {
    h += "<p>Plans the search validated on the real model, by round:</p>\n";
    h += validation_table(d);
  }
  if (!d.long_context.empty()) {
    h += fmt::format(
        "<p>Long context: the report text's samples joined into one stream, chunks of ctx tokens "
        "(BOS first, second half scored), the plan against {}:</p>\n",
        esc(d.long_context_baseline));
    h += long_context_table(d);
  }

  if (!d.engine_plans.empty()) {
    h += "<h2 id=\"engines\">Plans per serving engine</h2>\n";
    h += "<p>The best plan each engine runs at this budget (<code>kvplan search --engine E</code>: "
         "its formats and its per-layer structure only), measured on the same report text; the "
         "interval is the engine's plan against the best uniform pair of any format.</p>\n";
    h += engine_table(d);
  }
  h += "<h2 id=\"provenance\">Provenance</h2>\n";
  h += facts(d.provenance);
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace kvplan::report
