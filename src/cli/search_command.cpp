// kvplan search: from a (merged) profile to a validated plan.json under a memory budget
// (pipeline::search_profile).
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/search_flags.h"
#include "cli/tuned_plan_text.h"
#include "pipeline/tune.h"
#include "profile/profile_data.h"

namespace kvplan::cli {
namespace {

struct SearchCommandOptions {
  std::string profile, model, output, prompts;
  SearchFlags flags;
  bool json = false;
};

void run_search(const SearchCommandOptions& o) {
  const pipeline::SearchRequest request = search_request_from_flags(o.flags);
  const pipeline::TunedPlan tuned = pipeline::search_profile(
      read_profile(o.profile), o.model, request,
      o.prompts.empty() ? std::nullopt : std::optional<std::filesystem::path>(o.prompts),
      config_dir() / "calibration" / "default.jsonl");
  write_plan(o.output, tuned.plan);
  print_tuned_plan(tuned, o.output, o.json);
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
