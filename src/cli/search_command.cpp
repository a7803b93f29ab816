// kvplan search: from a (merged) profile to a validated plan.json under a memory budget.
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/plan_search_runner.h"
#include "core/error.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "profile/profile_data.h"

namespace kvplan::cli {
namespace {

struct SearchCommandOptions {
  std::string profile, model, output;
  SearchFlags flags;
  bool json = false;
};

void run_search(const SearchCommandOptions& o) {
  const Profile profile = read_profile(o.profile);
  const ModelWeights weights = load_model_weights(o.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  search_and_write_plan(profile, weights, *tokenizer, o.flags, o.output, o.json);
}

}  // namespace

void register_search_command(CLI::App& app) {
  auto o = std::make_shared<SearchCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "search",
      "Search a profile for the best per-layer KV plan under a budget, validated on the model");
  cmd->footer(
      "Example: kvplan search --profile profile.json --model SmolLM2-135M-Instruct.Q4_1.gguf "
      "--max-bits 4 -o plan.json\n"
      "Pareto-prunes each layer's pairs, groups alike layers (DBSCAN), runs NSGA-II (pagmo2) on "
      "the\n"
      "additive dKL surrogate, measures the best plans on held-out prompts and refits the "
      "surrogate.");
  cmd->add_option("--profile", o->profile, "profile.json from `kvplan profile` (merged)")
      ->required();
  cmd->add_option("--model", o->model, "The model the profile was made for")->required();
  cmd->add_option("-o,--output", o->output, "plan.json to write")->required();
  add_search_flags(cmd, o->flags);
  cmd->add_flag("--json", o->json, "Print the plan as JSON");
  cmd->callback([o] { run_search(*o); });
}

}  // namespace kvplan::cli
