#include "report/markdown_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/format_bytes.h"
#include "report/number_format.h"
#include "report/report_text.h"

namespace kvplan::report {
namespace {

// Table cells must not break the row: '|' is escaped, newlines become spaces.
std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string row(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& c : cells) out += " " + cell(c) + " |";
  return out + "\n";
}

std::string header(const std::vector<std::string>& cells, size_t left_columns = 1) {
  std::string out = row(cells) + "|";
  for (size_t i = 0; i < cells.size(); ++i) out += i < left_columns ? "---|" : "---:|";
  return out + "\n";
}

std::string facts(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = header({"", ""}, 2);
  for (const auto& [label, value] : rows) out += row({label, value});
  return out;
}

std::string heatmap_table(const Heatmap& h, const std::vector<LayerRow>& layers) {
  std::vector<std::string> head = {"layer"};
  for (const std::string& c : h.candidates) head.push_back(c);
  std::string out = header(head);
  for (size_t l = 0; l < h.values.size(); ++l) {
    std::vector<std::string> cells = {std::to_string(l)};
    for (size_t c = 0; c < h.candidates.size(); ++c) {
      std::string v = format_significant(h.values[l][c], 3);
      // Bold: the plan's choice for this layer.
      if (l < layers.size() && layers[l].heads.empty() && layers[l].pair.name() == h.candidates[c])
        v = "**" + v + "**";
      cells.push_back(v);
    }
    out += row(cells);
  }
  return out;
}

}  // namespace

std::string markdown_report(const ReportData& d) {
  std::string m = fmt::format("# kvplan report: {}\n\n{}\n\n**{}**\n\n", d.model.name,
                              model_line(d), summary_line(d));
  for (const std::string& w : d.warnings) m += fmt::format("> **Warning:** {}\n\n", w);

  m += "## The plan, per layer\n\n";
  m += header({"layer", "group", "K", "V", "K B/token", "V B/token", "dKL of this pair",
               "e_o of this pair", "surrogate weight"},
              4);
  for (const LayerRow& l : d.layers) {
    m += row({std::to_string(l.index), std::to_string(l.group), l.side_text(true),
              l.side_text(false), format_significant(l.key_bytes_per_token, 4),
              format_significant(l.value_bytes_per_token, 4), optional_significant(l.dkl),
              optional_significant(l.e_o), optional_significant(l.surrogate_weight)});
  }

  m += "\n## Per-layer sensitivity\n\n";
  m += fmt::format(
      "From `{}`: every layer quantized alone with every candidate pair, real packed formats. "
      "Bold: the plan's choice.\n\n",
      d.profile_file);
  m += fmt::format("### dKL: {}\n\n", d.dkl.description) + heatmap_table(d.dkl, d.layers);
  m += fmt::format("\n### e_o: {}\n\n", d.e_o.description) + heatmap_table(d.e_o, d.layers);

  m += "\n## Pareto front and uniform baselines\n\n";
  m += "The exact front of the additive surrogate (multiple-choice knapsack, `exact`) and "
       "NSGA-II's front of the corrected surrogate (`nsga2`), as refit on real validations; "
       "measured values are mean KL(exact || quantized) on the selection text. Plan and "
       "baselines below are measured on the report text, which never chose anything.\n\n";
  const std::vector<size_t> shown = front_rows_shown(d.front);
  if (shown.size() < d.front.size()) {
    m += fmt::format("{} of {} front points shown (evenly spaced, and every measured one).\n\n",
                     shown.size(), d.front.size());
  }
  m += header({"front", "equivalent bits", "B/token", "predicted error", "measured mean KL"}, 1);
  for (const size_t i : shown) {
    const FrontPoint& f = d.front[i];
    m += row({f.source.empty() ? "search" : f.source, format_significant(f.equivalent_bits, 4),
              format_count(static_cast<int64_t>(std::llround(f.bytes_per_token))),
              format_significant(f.predicted_error), optional_significant(f.mean_kl)});
  }
  m += "\n";
  // Plans that record why each baseline was measured get a column for it.
  const bool reasons =
      std::any_of(d.baselines.begin(), d.baselines.end(),
                  [](const BaselinePoint& b) { return !b.measured_because.empty(); });
  std::vector<std::string> columns = {"KV",
                                      "equivalent bits",
                                      "B/token",
                                      "within budget",
                                      "mean KL",
                                      "top-1",
                                      "PPL",
                                      "surrogate prediction",
                                      "plan - baseline KL [95 % CI]"};
  if (reasons) columns.push_back("measured because");
  m += header(columns);
  if (d.plan_mean_kl) {
    std::vector<std::string> cells = {"**plan**",
                                      format_significant(d.summary.equivalent_bits, 4),
                                      format_count(static_cast<int64_t>(d.summary.bytes_per_token)),
                                      "yes",
                                      "**" + format_significant(*d.plan_mean_kl) + "**",
                                      d.plan_top1 ? format_percent(*d.plan_top1) : "n/a",
                                      optional_significant(d.plan_ppl, 6),
                                      optional_significant(d.plan_predicted),
                                      ""};
    if (reasons) cells.emplace_back();
    m += row(cells);
  }
  for (const BaselinePoint& b : d.baselines) {
    std::vector<std::string> cells = {b.kv,
                                      format_significant(b.equivalent_bits, 4),
                                      format_count(static_cast<int64_t>(b.bytes_per_token)),
                                      b.within_budget ? "yes" : "no",
                                      format_significant(b.mean_kl),
                                      format_percent(b.top1_agreement),
                                      format_significant(b.ppl, 6),
                                      optional_significant(b.predicted_error),
                                      kl_difference_text(b)};
    if (reasons) cells.push_back(b.measured_because);
    m += row(cells);
  }

  m += "\n## Memory\n\n";
  m += fmt::format(
      "KV-cache bytes by the plan's layout (page of {} tokens), one sequence per context; "
      "'fits' is in {} of GPU memory{}.\n\n",
      d.quantization.block_size, format_bytes(static_cast<double>(d.memory.gpu_memory_bytes), 2, 3),
      d.memory.weights_bytes
          ? " less " + format_bytes(static_cast<double>(d.memory.weights_bytes), 2, 3) +
                " of weights"
          : std::string());
  if (!d.sliding_window_note.empty()) m += d.sliding_window_note + "\n\n";
  std::vector<std::string> head = {"KV", "equivalent bits", "B/token", "vs bf16"};
  for (int64_t t : d.memory.contexts) {
    head.push_back(context_heading(t) + ": bytes per sequence");
    head.push_back(context_heading(t) + ": sequences that fit");
  }
  head.push_back("longest context that fits");
  m += header(head);
  for (const MemoryRow& r : d.memory_rows) {
    std::vector<std::string> cells = {
        r.is_plan ? "**plan**" : r.label, format_significant(r.equivalent_bits, 4),
        format_count(static_cast<int64_t>(std::llround(r.bytes_per_token))),
        format_ratio(r.compression_vs_bf16)};
    for (size_t i = 0; i < d.memory.contexts.size(); ++i) {
      cells.push_back(format_bytes(static_cast<double>(r.bytes_per_sequence[i]), 2, 3));
      cells.push_back(fit_cell(r.sequences_that_fit[i], d.memory.contexts[i]));
    }
    cells.push_back(format_count(r.longest_context));
    m += row(cells);
  }

  m += "\n## Validation\n\n" + facts(d.validation_facts);
  if (!d.validations.empty()) {
    m += "\nPlans the search validated on the real model, by round:\n\n";
    m += header({"round", "memory", "predicted error", "measured mean KL"}, 0);
    for (const ValidationPoint& v : d.validations) {
      m += row({std::to_string(v.round), format_significant(v.memory, 4),
                format_significant(v.predicted_error), format_significant(v.mean_kl)});
    }
  }
  if (!d.long_context.empty()) {
    m += fmt::format(
        "\nLong context: the report text's samples joined into one stream, chunks of ctx tokens "
        "(BOS first, second half scored), the plan against {}:\n\n",
        d.long_context_baseline);
    m += header({"ctx", "chunks", "scored positions", "plan mean KL", "baseline mean KL",
                 "plan / baseline"});
    for (const LongContextRow& p : d.long_context) {
      m += row({format_count(p.ctx), std::to_string(p.chunks), format_count(p.scored),
                format_significant(p.plan_mean_kl), format_significant(p.baseline_mean_kl),
                format_significant(p.plan_mean_kl / p.baseline_mean_kl, 3)});
    }
  }
  if (!d.engine_plans.empty()) {
    m += "\n## Plans per serving engine\n\n"
         "The best plan each engine runs at this budget (`kvplan search --engine E`: its formats "
         "and its per-layer structure only), measured on the same report text; the interval is "
         "the engine's plan against the best uniform pair of any format:\n\n";
    m += header({"engine", "layer structure", "B/token", "mean KL", "top-1", "best uniform",
                 "plan - best uniform [95 % CI]"},
                2);
    for (const EnginePlanRow& e : d.engine_plans) {
      m += row({e.engine, e.structure, fmt::format("{:.0f}", e.bytes_per_token),
                e.mean_kl ? format_significant(*e.mean_kl) : "-",
                e.top1 ? fmt::format("{:.2f} %", 100 * *e.top1) : "-",
                e.best_uniform_kl
                    ? fmt::format("{} ({})", e.best_uniform, format_significant(*e.best_uniform_kl))
                    : "-",
                e.diff
                    ? fmt::format("{:+.4f} [{:+.4f}, {:+.4f}]", *e.diff, *e.diff_low, *e.diff_high)
                    : "-"});
    }
  }
  m += "\n## Provenance\n\n" + facts(d.provenance);
  return m;
}

}  // namespace kvplan::report
