// kvplan tune: profile + search + validate in one command, with good defaults — the main job
// (pipeline::tune); this file parses its flags into a TuneRequest and writes what it returns.
#include <filesystem>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/profile_flags.h"
#include "cli/search_flags.h"
#include "cli/tuned_plan_text.h"
#include "pipeline/tune.h"
#include "profile/progress.h"

namespace kvplan::cli {
namespace {

struct TuneCommandOptions {
  std::string model, output = "plan.json", profile_out;
  ProfileFlags profile;
  SearchFlags flags;
  bool json = false;
};

void run_tune(const TuneCommandOptions& o) {
  pipeline::TuneRequest request{.model = o.model,
                                .profile = profile_request_from_flags(o.profile),
                                .search = search_request_from_flags(o.flags)};
  // A per-head search ranks heads by their own dKL re-runs.
  if (o.flags.per_head) request.profile.options.per_head_dkl = true;
  ProgressPrinter printer(stderr);
  request.profile.options.progress = [&](const ProfileProgress& p) { printer.update(p); };
  // The profile is always kept (next to the plan by default): it is the expensive part.
  const std::string profile_out =
      o.profile_out.empty()
          ? (std::filesystem::path(o.output).parent_path() / "profile.json").string()
          : o.profile_out;
  request.profile.on_profile = [&](const Profile& profile) {
    printer.finish();
    write_profile(profile_out, profile);
    spdlog::info("profile written to {}", profile_out);
  };
  const pipeline::TunedPlan tuned = pipeline::tune(request);
  write_plan(o.output, tuned.plan);
  print_tuned_plan(tuned, o.output, o.json);
}

}  // namespace

void register_tune_command(CLI::App& app) {
  auto o = std::make_shared<TuneCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Profile, search and validate: the per-layer KV plan for a model under a budget");
  cmd->footer(
      "Example: kvplan tune --model SmolLM2-135M-Instruct.Q4_1.gguf --max-bytes-per-token 6480 -o "
      "plan.json\n"
      "Runs `kvplan profile` on the calibration prompts (default "
      "configs/calibration/default.jsonl),\n"
      "then `kvplan search` (selection text configs/calibration/selection.jsonl, report text\n"
      "configs/calibration/report.jsonl).");
  cmd->add_option("--model", o->model, "A .gguf file or an HF model directory")->required();
  cmd->add_option("-o,--output", o->output, "plan.json to write (default plan.json)");
  cmd->add_option("--profile-out", o->profile_out,
                  "Where to write the profile (default: profile.json next to the plan)");
  add_profile_flags(cmd, o->profile);
  add_search_flags(cmd, o->flags);
  cmd->add_flag("--json", o->json, "Print the plan as JSON");
  cmd->callback([o] { run_tune(*o); });
}

}  // namespace kvplan::cli
