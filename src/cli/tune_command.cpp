// kvplan tune: profile + search + validate in one command, with good defaults — the main job.
#include <filesystem>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/plan_search_runner.h"
#include "cli/profile_flags.h"
#include "core/error.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "engines/engine.h"
#include "formats/kv_bytes.h"
#include "profile/profiler.h"
#include "profile/progress.h"
#include "profile/side_candidates.h"

namespace kvplan::cli {
namespace {

struct TuneCommandOptions {
  std::string model, output = "plan.json", profile_out;
  ProfileFlags profile;
  SearchFlags flags;
  bool json = false;
};

// A byte budget no plan can meet is refused from the formats' sizes, before profiling.
void refuse_budget_below_smallest_plan(const search::TuneOptions& t, const ModelConfig& c,
                                       const ProfileOptions& p, const EngineSpec& engine) {
  if (t.measure != search::MemoryMeasure::kBytes) return;
  double budget = t.budget;
  if (t.max_effective_bits > 0) {
    budget = t.max_effective_bits * kv_values_per_token(kv_geometry(c)) / 8;
  }
  const std::vector<KvPair> candidates =
      p.candidates.empty()
          ? catalog_side_candidates(c, p.settings, {.formats = p.formats, .all_dkl = false})
                .candidates
          : p.candidates;
  const std::vector<int> boundary = engine_boundary_layers(engine, c.n_layers);
  const double smallest =
      smallest_plan_bytes(c, p.settings, candidates, t.layer_token_share, boundary);
  if (smallest > budget * (1 + 1e-12)) {
    fail(ErrorCode::kInvalidArgument,
         "budget {} = {:.1f} bytes per token: the smallest possible plan takes {} bytes per token "
         "(every layer in its smallest candidate{})",
         t.budget_description, budget, smallest,
         boundary.empty() ? "" : "; " + boundary_layers_note(engine, c.n_layers));
  }
}

void run_tune(const TuneCommandOptions& o) {
  ProfileOptions opt = profile_options_from_flags(o.profile);
  // Bad search flags are refused before the long profile.
  const EngineSpec& engine = engine_spec(tune_options_from_flags(o.flags).engine);
  if (engine.id != EngineId::kKvplan && opt.formats.empty() && opt.candidates.empty()) {
    // Profile what the engine stores; f32 is the exact side of every profile already.
    for (const Format& f : engine_formats(engine)) {
      if (f.id() != FormatId::kF32) opt.formats.push_back(f);
    }
    spdlog::info("--engine {}: profiling its formats {}", engine.name, format_list(opt.formats));
  }

  const ProfileInputs in = load_profile_inputs(o.model, o.profile);
  const search::TuneOptions search_options =
      tune_options_from_flags(o.flags, in.weights.config.sliding_window);
  refuse_budget_below_smallest_plan(search_options, in.weights.config, opt, engine);
  // Every input is checked before the long profile: the texts and their overlap.
  const std::filesystem::path calibration_file = calibration_path(o.profile);
  const PlanTexts texts =
      load_plan_texts(o.flags, *in.tokenizer, in.weights.config, &calibration_file);
  const Transformer model(in.weights);
  ProgressPrinter printer(stderr);
  opt.progress = [&](const ProfileProgress& p) { printer.update(p); };
  Profile profile = run_profile(model, in.calibration, opt);
  printer.finish();
  profile.timings["load_s"] = in.load_s;
  // The profile is always kept (next to the plan by default): it is the expensive part.
  const std::string profile_out =
      o.profile_out.empty()
          ? (std::filesystem::path(o.output).parent_path() / "profile.json").string()
          : o.profile_out;
  write_profile(profile_out, profile);
  spdlog::info("profile written to {}", profile_out);
  search_and_write_plan(profile, in.weights, texts, o.flags, o.output, o.json);
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
