// kvplan search: from a (merged) profile to a validated plan.json under a memory budget.
#include <memory>
#include <string>

#include <filesystem>
#include <optional>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/plan_search_runner.h"
#include "core/error.h"
#include "core/hash.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "profile/profile_data.h"

namespace kvplan::cli {
namespace {

struct SearchCommandOptions {
  std::string profile, model, output, prompts;
  SearchFlags flags;
  bool json = false;
};

void run_search(const SearchCommandOptions& o) {
  const Profile profile = read_profile(o.profile);
  const ModelWeights weights = load_model_weights(o.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  // The calibration text, for the overlap check: the one given, or the default when the profile
  // was made on it (same token hash).
  const std::filesystem::path prompts = o.prompts.empty()
                                            ? config_dir() / "calibration" / "default.jsonl"
                                            : std::filesystem::path(o.prompts);
  std::optional<std::filesystem::path> calibration;
  if (std::filesystem::exists(prompts)) {
    const CalibrationSet c = load_calibration(prompts, *tokenizer, weights.config,
                                              {.max_tokens = profile.calibration.max_tokens});
    if (hash_hex(c.hash) == profile.calibration.hash) {
      calibration = prompts;
    } else if (!o.prompts.empty()) {
      fail(ErrorCode::kInvalidArgument,
           "--prompts {}: its tokens hash to {}, the profile was made on {} ({})", o.prompts,
           hash_hex(c.hash), profile.calibration.source, profile.calibration.hash);
    }
  }
  const PlanTexts texts =
      load_plan_texts(o.flags, *tokenizer, weights.config, calibration ? &*calibration : nullptr);
  search_and_write_plan(profile, weights, texts, o.flags, o.output, o.json);
}

}  // namespace

void register_search_command(CLI::App& app) {
  auto o = std::make_shared<SearchCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "search",
      "Search a profile for the best per-layer KV plan under a budget, validated on the model");
  cmd->footer(
      "Example: kvplan search --profile profile.json --model SmolLM2-135M-Instruct.Q4_1.gguf "
      "--max-bytes-per-token 6480 -o plan.json\n"
      "Pareto-prunes each layer's pairs, solves the additive dKL surrogate exactly (knapsack DP),\n"
      "runs NSGA-II (pagmo2) on the corrected surrogate seeded with that front, chooses among the\n"
      "best plans measured on the selection text, and reports the plan and every uniform\n"
      "baseline on the report text with paired bootstrap intervals. --engine vllm (ik-llamacpp,\n"
      "trtllm, ...) searches only what that engine runs; `kvplan export --to` writes it.");
  cmd->add_option("--profile", o->profile, "profile.json from `kvplan profile` (merged)")
      ->required();
  cmd->add_option("--model", o->model, "The model the profile was made for")->required();
  cmd->add_option("--prompts", o->prompts,
                  "The calibration text the profile was made on, for the overlap check "
                  "(default: configs/calibration/default.jsonl when it matches)");
  cmd->add_option("-o,--output", o->output, "plan.json to write")->required();
  add_search_flags(cmd, o->flags);
  cmd->add_flag("--json", o->json, "Print the plan as JSON");
  cmd->callback([o] { run_search(*o); });
}

}  // namespace kvplan::cli
