#include "report/report_text.h"

#include <fmt/format.h>

#include "report/number_format.h"

namespace kvplan::report {

std::string model_line(const ReportData& d) {
  const KvGeometry& g = d.model.geometry;
  const int kv_heads = g.layers.empty() ? 0 : g.layers.front().n_kv_heads;
  const int head_dim = g.layers.empty() ? 0 : g.layers.front().head_dim;
  return fmt::format("{} ({}), {} layers, {} attention heads, {} KV heads, head_dim {}",
                     d.model.name, d.model.architecture, g.n_layers(), d.model.n_attention_heads,
                     kv_heads, head_dim);
}

std::string summary_line(const ReportData& d) {
  std::string s =
      fmt::format("{} equivalent bits ({} effective), {} B/token, {} less KV memory than bf16",
                  format_significant(d.summary.equivalent_bits, 4),
                  format_significant(d.summary.effective_bits, 4),
                  format_count(static_cast<int64_t>(d.summary.bytes_per_token)),
                  format_ratio(d.summary.compression_ratio));
  if (d.plan_mean_kl) {
    s += fmt::format("; mean KL {} vs exact KV", format_significant(*d.plan_mean_kl));
    if (d.plan_top1) s += fmt::format(", top-1 agreement {}", format_percent(*d.plan_top1));
    s += d.validated ? " (measured on the report text)" : " (not validated)";
  }
  if (!d.budget.empty()) s += fmt::format("; budget {}", d.budget);
  return s;
}

std::string optional_significant(const std::optional<double>& v, int digits) {
  return v ? format_significant(*v, digits) : "n/a";
}

std::string context_heading(int64_t tokens) {
  return "T=" + format_count(tokens);
}

std::string fit_cell(int64_t sequences, int64_t context) {
  return fmt::format("{} ({} tokens)", format_count(sequences), format_count(sequences * context));
}

}  // namespace kvplan::report
