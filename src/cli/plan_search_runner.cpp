#include "cli/plan_search_runner.h"

#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/json_text.h"
#include "model/transformer.h"
#include "plan/plan.h"
#include "profile/calibration.h"
#include "search/held_out_kl.h"

namespace kvplan::cli {

void search_and_write_plan(const Profile& profile, const ModelWeights& weights,
                           const Tokenizer& tokenizer, const SearchFlags& flags,
                           const std::string& output, bool json) {
  if (profile.model.fingerprint != hash_hex(weights.fingerprint)) {
    fail(ErrorCode::kInvalidArgument,
         "the profile was made for model fingerprint {} ({}), the model given has {}",
         profile.model.fingerprint, profile.model.name, hash_hex(weights.fingerprint));
  }
  const search::TuneOptions options = tune_options_from_flags(flags);
  const std::string held_out_path = validation_path(flags);
  const CalibrationSet held_out_set =
      load_calibration(held_out_path, tokenizer, weights.config,
                       {.max_tokens = flags.validation_max_tokens, .num_prompts = 0});
  if (held_out_set.prompts.empty()) {
    fail(ErrorCode::kInvalidArgument, "{}: no held-out prompts", held_out_path);
  }
  if (hash_hex(held_out_set.hash) == profile.calibration.hash) {
    spdlog::warn("the held-out prompts are the calibration prompts: validation is not held out");
  }
  const Transformer model(weights);
  spdlog::info("held-out prompts: {} ({} prompts, {} tokens)", held_out_path,
               held_out_set.prompts.size(), held_out_set.n_tokens);
  const search::HeldOutKl held_out(model, held_out_set.prompts, profile.quantization);
  const search::TuneOutput out = search::tune_plan(
      profile, held_out,
      // the file name only: the plan must not depend on where the checkout is
      std::filesystem::path(held_out_set.source).filename().string(), held_out_set.hash, options);
  check_plan_matches(out.plan, kv_geometry(weights.config), weights.config.source);
  write_plan(output, out.plan);

  if (json) {
    std::printf("%s\n", json_text(plan_to_json(out.plan), 2).c_str());
    return;
  }
  const PlanSummary s = summarize_plan(out.plan);
  std::printf("plan        %s (budget: %s)\n", output.c_str(), options.budget_description.c_str());
  std::printf("layers      ");
  for (const PlanLayer& l : out.plan.layers) std::printf("%s ", l.pair.name().c_str());
  std::printf(
      "\nmemory      %.3f equivalent bits, %.3f effective bits, %.0f B/token (%.2fx less "
      "than bf16)\n",
      s.equivalent_bits, s.effective_bits, s.bytes_per_token, s.compression_ratio);
  std::printf("quality     mean KL %.6f, top-1 %.2f %%, PPL %.4f (exact KV %.4f) on %s\n",
              out.plan.quality["mean_kl"].get<double>(),
              100 * out.plan.quality["top1_agreement"].get<double>(),
              out.plan.quality["ppl"].get<double>(), out.plan.quality["ppl_exact_kv"].get<double>(),
              held_out_path.c_str());
  std::printf("search      %zu groups, %d rounds, %zu real evaluations\n\n", out.groups.size(),
              out.loop.rounds, out.plan.provenance["real_evaluations"].get<size_t>());
  std::printf("%-12s %6s %10s %12s %8s  %s\n", "baseline", "bits", "B/token", "mean KL", "top-1",
              "within budget");
  for (const auto& b : out.plan.baselines) {
    std::printf("%-12s %6.2f %10.0f %12.6f %7.2f%%  %s\n", b["kv"].get<std::string>().c_str(),
                b["equivalent_bits"].get<double>(), b["bytes_per_token"].get<double>(),
                b["mean_kl"].get<double>(), 100 * b["top1_agreement"].get<double>(),
                b["within_budget"].get<bool>() ? "yes" : "no");
  }
}

}  // namespace kvplan::cli
