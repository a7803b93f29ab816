#include "cli/plan_search_runner.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/json_text.h"
#include "model/transformer.h"
#include "formats/kv_bytes.h"
#include "plan/plan.h"
#include "profile/calibration.h"
#include "profile/text_overlap.h"
#include "search/held_out_kl.h"

namespace kvplan::cli {
namespace {

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// Each sample's text as bytes (a dialogue's messages joined), the unit the overlap check compares.
std::vector<std::vector<int32_t>> sample_bytes(const std::vector<CalibrationItem>& items) {
  std::vector<std::vector<int32_t>> out;
  for (const CalibrationItem& item : items) {
    std::string text = item.text;
    for (const ChatMessage& m : item.messages) text += m.content + "\n";
    std::vector<int32_t> bytes;
    for (const unsigned char c : text) bytes.push_back(c);
    for (const int32_t t : item.tokens) bytes.push_back(256 + t);  // token-id samples as given
    out.push_back(std::move(bytes));
  }
  return out;
}

struct NamedSamples {
  std::string file;
  std::vector<CalibrationItem> items;
};

void refuse_overlap(const NamedSamples& a, const NamedSamples& b) {
  const TextOverlap o = find_text_overlap(sample_bytes(a.items), sample_bytes(b.items),
                                          {.ngram_tokens = kOverlapBytes});
  if (!o.overlaps) return;
  fail(ErrorCode::kInvalidArgument,
       "{} (line {}) and {} (line {}) overlap: they share {}; the calibration, selection and "
       "report texts must be disjoint (--allow-overlap to accept it)",
       a.file, a.items[o.sample_a].line, b.file, b.items[o.sample_b].line,
       o.reason.find("identical") != std::string::npos
           ? std::string("an identical sample")
           : fmt::format("a run of {} bytes or more", kOverlapBytes));
}

void print_result(const search::TuneOutput& out, const search::TuneOptions& options,
                  const std::string& output, const std::string& selection_file,
                  const std::string& report_file) {
  const Plan& plan = out.plan;
  const PlanSummary s = summarize_plan(plan);
  const PlanQuality& q = plan.results.quality;
  const SearchProvenance& pv = plan.results.provenance;
  std::printf("plan        %s (budget: %s)\n", output.c_str(),
              pv.budget.empty() ? options.budget_description.c_str() : pv.budget.c_str());
  std::printf("layers      ");
  for (const PlanLayer& l : plan.layers) std::printf("%s ", l.pair.name().c_str());
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
      "            %d rounds, %zu evaluations on selection, %zu on report; rank "
      "correlation predicted/measured %s\n",
      out.loop.rounds, static_cast<size_t>(pv.selection_evaluations.value_or(0)),
      static_cast<size_t>(pv.report_evaluations.value_or(0)),
      std::isfinite(out.rank_correlation) ? fmt::format("{:.2f}", out.rank_correlation).c_str()
                                          : "n/a");
  if (!out.cluster_note.empty()) std::printf("clustering  %s\n", out.cluster_note.c_str());
  std::printf("\n%-22s %7s %9s %11s %8s  %-34s\n", "uniform baseline", "bits", "B/token", "mean KL",
              "top-1", "plan - baseline KL [95% CI]");
  int listed = 0;
  for (const search::BaselineResult& b : out.baselines) {
    if (!b.within_budget) continue;
    if (!b.measured) {
      ++listed;
      continue;
    }
    std::printf("%-22s %7.3f %9.0f %11.6f %7.2f%%  %+.6f [%+.6f, %+.6f] %s\n",
                b.config.pair.name().c_str(),
                8 * b.config.bytes_per_token / kv_values_per_token(plan.model.geometry),
                b.config.bytes_per_token, b.report.mean_kl, 100 * b.report.top1_agreement, b.diff,
                b.diff_low, b.diff_high, b.verdict());
  }
  if (q.best_uniform) {
    std::printf("\nbest uniform within the budget: %s, mean KL %.6f; plan / best = %.3f\n",
                q.best_uniform->kv.c_str(), q.best_uniform->mean_kl, q.best_uniform->ratio);
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
        "%d more uniform configurations fit the budget; predicted worse, not measured on "
        "the report text (plan.json lists them)\n",
        listed);
  }
}

}  // namespace

PlanTexts load_plan_texts(const SearchFlags& flags, const Tokenizer& tokenizer,
                          const ModelConfig& config,
                          const std::filesystem::path* calibration_file) {
  const CalibrationOptions windows{.max_tokens = flags.ctx,
                                   .num_prompts = 0,
                                   .chunk = true,
                                   .max_windows = flags.windows_per_sample};
  const NamedSamples selection{selection_path(flags), read_calibration_file(selection_path(flags))};
  const NamedSamples report{report_path(flags), read_calibration_file(report_path(flags))};
  if (!flags.allow_overlap) {
    refuse_overlap(selection, report);
    if (calibration_file != nullptr) {
      const NamedSamples calibration{calibration_file->string(),
                                     read_calibration_file(*calibration_file)};
      refuse_overlap(calibration, selection);
      refuse_overlap(calibration, report);
    } else {
      spdlog::warn(
          "the calibration text is not at hand: only selection vs report was checked for "
          "overlap");
    }
  }
  std::string joined;
  for (const CalibrationItem& item : report.items) {
    if (!joined.empty()) joined += "\n\n";
    joined += item.text;
    for (const ChatMessage& m : item.messages) joined += m.content + "\n";
  }
  return {tokenize_calibration(selection.items, selection.file, tokenizer, config, windows),
          tokenize_calibration(report.items, report.file, tokenizer, config, windows),
          tokenizer.encode(joined, {.add_bos = true}), tokenizer.bos_id()};
}

void search_and_write_plan(const Profile& profile, const ModelWeights& weights,
                           const PlanTexts& texts, const SearchFlags& flags,
                           const std::string& output, bool json) {
  if (profile.model.fingerprint != hash_hex(weights.fingerprint)) {
    fail(ErrorCode::kInvalidArgument,
         "the profile was made for model fingerprint {} ({}), the model given has {}",
         profile.model.fingerprint, profile.model.name, hash_hex(weights.fingerprint));
  }
  const search::TuneOptions options = tune_options_from_flags(flags, weights.config.sliding_window);
  const CalibrationSet& selection_set = texts.selection;
  const CalibrationSet& report_set = texts.report;
  const std::string selection_file = selection_set.source, report_file = report_set.source;
  const Transformer model(weights);
  spdlog::info("selection {}: {} windows, {} tokens; report {}: {} windows, {} tokens",
               selection_file, selection_set.prompts.size(), selection_set.n_tokens, report_file,
               report_set.prompts.size(), report_set.n_tokens);
  const search::HeldOutKl::CacheRules rules{profile.quantization, profile.chunk_attends_quantized,
                                            profile.kv_absmax};
  const search::HeldOutKl selection(model, selection_set.prompts, rules);
  const search::HeldOutKl report(model, report_set.prompts, rules);
  std::optional<search::LongContextKl> long_context;
  if (flags.long_context_tokens > 0 && !flags.long_contexts.empty()) {
    if (texts.bos_id) {
      long_context.emplace(
          model, texts.report_stream, *texts.bos_id, rules,
          search::LongContextKl::Options{.contexts = flags.long_contexts,
                                         .tokens_per_context = flags.long_context_tokens});
    } else {
      spdlog::warn("long-context KL left out: the model has no BOS token for the chunks");
    }
  }
  search::TuneOutput out = search::tune_plan(
      profile, {&selection, nullptr, file_name(selection_file), selection_set.hash},
      {&report, long_context ? &*long_context : nullptr, file_name(report_file), report_set.hash},
      options);
  check_plan_matches(out.plan, kv_geometry(weights.config), weights.config.source);
  // The profile records no windows; the plan carries the model's, so that its memory estimates,
  // reports and runtime pages count a sliding layer's window, not the whole context.
  for (size_t l = 0; l < out.plan.model.geometry.layers.size(); ++l) {
    out.plan.model.geometry.layers[l].sliding_window = weights.config.sliding_window[l];
  }
  write_plan(output, out.plan);
  if (json) {
    std::printf("%s\n", json_text(plan_to_json(out.plan), 2).c_str());
    return;
  }
  print_result(out, options, output, selection_file, report_file);
}

}  // namespace kvplan::cli
