#include "cli/tuned_plan_text.h"

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "core/json_text.h"
#include "formats/kv_bytes.h"

namespace kvplan::cli {
namespace {

void print_text(const pipeline::TunedPlan& tuned, const std::string& output) {
  const Plan& plan = tuned.plan;
  const search::SearchOutcome& out = tuned.outcome;
  const std::string& selection_file = tuned.selection_file;
  const std::string& report_file = tuned.report_file;
  const PlanSummary s = summarize_plan(plan);
  const PlanQuality& q = plan.results.quality;
  const SearchProvenance& pv = plan.results.provenance;
  std::printf("plan        %s (budget: %s)\n", output.c_str(), pv.budget.c_str());
  std::printf("layers      ");
  for (const PlanLayer& l : plan.layers) {
    if (!l.per_head()) {
      std::printf("%s ", l.pair.name().c_str());
      continue;
    }
    std::string heads;  // a per-head layer: its heads' pairs in brackets
    for (const KvPair& p : l.heads) heads += (heads.empty() ? "" : ",") + p.name();
    std::printf("[%s] ", heads.c_str());
  }
  std::printf(
      "\nmemory      %.0f B/token, %.3f effective bits (%.3f nominal), %.2fx less than bf16\n",
      s.bytes_per_token, s.effective_bits, s.equivalent_bits, s.compression_ratio);
  std::printf("chosen      %s, mean KL %.6f on %s (selection)\n", q.chosen_as.c_str(),
              q.selection_mean_kl.value_or(0), selection_file.c_str());
  std::printf("quality     mean KL %.6f, top-1 %.2f %%, PPL %.4f (exact KV %.4f) on %s (report)\n",
              q.mean_kl.value_or(0), 100 * q.top1_agreement.value_or(0), q.ppl.value_or(0),
              q.ppl_exact_kv.value_or(0), report_file.c_str());
  std::printf(
      "search      exact front %zu points (%zu states, %.3f s); NSGA-II front %zu points; an "
      "unseeded NSGA-II finds %.1f %% of the exact front within 0.5 %%\n",
      static_cast<size_t>(pv.exact_front_points.value_or(0)),
      static_cast<size_t>(pv.exact_front_states.value_or(0)), out.loop.exact.seconds,
      static_cast<size_t>(pv.nsga2_front_points.value_or(0)), 100 * out.nsga_exact_coverage);
  std::printf(
      "            %d round%s, %zu evaluations on selection, %zu on report; rank "
      "correlation predicted/measured %s\n",
      out.loop.rounds, out.loop.rounds == 1 ? "" : "s",
      static_cast<size_t>(pv.selection_evaluations.value_or(0)),
      static_cast<size_t>(pv.report_evaluations.value_or(0)),
      std::isfinite(out.rank_correlation) ? fmt::format("{:.2f}", out.rank_correlation).c_str()
                                          : "n/a");
  for (const search::ValidationRound& r : out.loop.round_log) {
    std::printf(
        "            round %d: %d measured, best %.6f; refit ranks them held out at %s; %s\n",
        r.round, r.measured, r.best_measured,
        std::isfinite(r.held_out_rank) ? fmt::format("{:.2f}", r.held_out_rank).c_str() : "n/a",
        r.next.c_str());
  }
  if (!out.cluster_note.empty()) std::printf("clustering  %s\n", out.cluster_note.c_str());
  std::printf("\n%-22s %7s %9s %11s %8s  %-34s\n", "uniform baseline", "bits", "B/token", "mean KL",
              "top-1", "plan - baseline KL [95% CI], measured because");
  int listed = 0;
  for (const search::BaselineResult& b : out.baselines) {
    if (!b.within_budget) continue;
    if (!b.measured) {
      ++listed;
      continue;
    }
    std::string why;
    for (const std::string& reason : b.measured_because) why += (why.empty() ? "" : "; ") + reason;
    std::printf("%-22s %7.3f %9.0f %11.6f %7.2f%%  %+.6f [%+.6f, %+.6f] %-13s  (%s)\n",
                b.config.pair.name().c_str(),
                8 * b.config.bytes_per_token / kv_values_per_token(plan.model.geometry),
                b.config.bytes_per_token, b.report.mean_kl, 100 * b.report.top1_agreement, b.diff,
                b.diff_low, b.diff_high, b.verdict(), why.c_str());
  }
  if (q.best_uniform) {
    std::printf("\nbest uniform within the budget: %s, mean KL %.6f; plan / best = %.3f\n",
                q.best_uniform->kv.c_str(), q.best_uniform->mean_kl, q.best_uniform->ratio);
  }
  if (q.headroom) {
    std::printf(
        "headroom: the best plan within the budget is predicted at %.3fx the best predicted "
        "uniform pair (%s): what allocation among these candidates can gain by the profile's "
        "additive surrogate\n",
        q.headroom->ratio, q.headroom->best_uniform.c_str());
  }
  for (const ComparedPlan& c : q.compared_plans) {
    std::printf("against %s (%s, %.0f B/token): mean KL %.6f; plan - it %+.6f [%+.6f, %+.6f] %s\n",
                c.source.c_str(), c.granularity.c_str(), c.bytes_per_token, c.mean_kl,
                c.difference.plan_minus_baseline, c.difference.low, c.difference.high,
                c.difference.verdict.c_str());
  }
  if (q.rank_correlation_on_report) {
    std::printf(
        "surrogate ranks the plan and the measured baselines on the report text at %.2f "
        "(Spearman)\n",
        *q.rank_correlation_on_report);
  }
  if (q.long_context) {
    std::printf("\nlong context (report text as one stream, %s as baseline):\n",
                q.long_context->baseline.c_str());
    std::printf("%7s %7s %8s %12s %12s %8s\n", "ctx", "chunks", "scored", "plan KL", "baseline KL",
                "ratio");
    for (const LongContextRow& r : q.long_context->rows) {
      std::printf("%7d %7d %8lld %12.6f %12.6f %8.3f\n", r.ctx, r.chunks,
                  static_cast<long long>(r.scored), r.plan_mean_kl, r.baseline_mean_kl,
                  r.plan_mean_kl / r.baseline_mean_kl);
    }
  }
  if (listed > 0) {
    std::printf(
        "%d more uniform configurations fit the budget, not measured on the report text: none "
        "is among the best predicted, its family pairing's best, near the budget or an engine "
        "default (plan.json lists them)\n",
        listed);
  }
}

}  // namespace

void print_tuned_plan(const pipeline::TunedPlan& tuned, const std::string& output, bool json) {
  if (json) {
    std::printf("%s\n", json_text(plan_to_json(tuned.plan), 2).c_str());
    return;
  }
  print_text(tuned, output);
}

}  // namespace kvplan::cli
