// kvplan profile: per-layer KV sensitivity (KVTuner's e_k, e_v, e_a, e_o, dKL) of a model for every
// candidate (key, value) format pair, written to profile.json; `kvplan profile merge` joins shards.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/profile_flags.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/json_text.h"
#include "pipeline/tune.h"
#include "profile/dkl_estimate.h"
#include "profile/profile_summary.h"
#include "profile/profiler.h"
#include "profile/progress.h"
#include "profile/shard_merge.h"

namespace kvplan::cli {
namespace {

struct ProfileCommandOptions {
  std::string model, shard, output;
  ProfileFlags profile;
  bool resume = false, json = false;
};

struct MergeCommandOptions {
  std::string output;
  std::vector<std::string> inputs;
  bool json = false;
};

void parse_shard(const std::string& text, int& index, int& count) {
  const size_t slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    size_t used = 0;
    index = std::stoi(text.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument("index");
    const std::string rest = text.substr(slash + 1);
    count = std::stoi(rest, &used);
    if (used != rest.size()) throw std::invalid_argument("count");
  } catch (const std::exception&) {
    fail(ErrorCode::kInvalidArgument, "--shard '{}': expected i/n, e.g. 0/8", text);
  }
  if (count < 1 || index < 0 || index >= count) {
    fail(ErrorCode::kInvalidArgument, "--shard '{}': expected 0 <= i < n", text);
  }
}

// The profile's identity from `p`, what was found from `s` (its summary).
void print_summary_text(const Profile& p, const ProfileSummary& s, const std::string& path) {
  std::printf(
      "profile      %s (%zu/%zu cells%s)\n", path.c_str(), s.output_cells, s.total_cells,
      p.shard_count > 1 ? fmt::format(", shard {}/{}", p.shard_index, p.shard_count).c_str() : "");
  std::printf("model        %s, %d layers, %zu candidate pairs\n", p.model.name.c_str(),
              p.n_layers(), p.candidates.size());
  std::printf("calibration  %s: %d prompts, %lld tokens (dKL: %d prompts, %lld positions)\n",
              p.calibration.source.c_str(), p.calibration.prompts,
              static_cast<long long>(p.calibration.tokens), p.calibration.kl_prompts,
              static_cast<long long>(p.calibration.kl_tokens));
  for (const KeyValueRatio& r : s.key_value_ratios) {
    std::printf("K/V ratio    %-10s %.3f  (keys low / values low; > 1: keys more sensitive)\n",
                r.name().c_str(), r.ratio);
  }
  std::printf("dKL          re-run for %zu cells, estimated from o_mse for the other %zu\n",
              s.dkl_measured_cells, s.output_cells - s.dkl_measured_cells);
  if (s.additivity) {
    const ModelCheck& a = *s.additivity;
    std::printf(
        "additivity   joint pair vs its key + value sides: mean %.1f %%, worst %.1f %% "
        "(layer %d, %s) over %d layers\n",
        100 * a.mean_abs_rel_error, 100 * a.max_abs_rel_error, a.worst_layer, a.worst_pair.c_str(),
        a.cells);
  }
  if (s.complete) {
    std::printf("8<4<2 bits   %s\n", s.monotonicity_violations.empty()
                                         ? "every metric, every layer"
                                         : s.monotonicity_violations.c_str());
  }
  if (s.timings.total_s) {
    std::printf("time         %s total, %.2f s per cell (%d threads)\n",
                format_duration(*s.timings.total_s).c_str(),
                s.timings.seconds_per_cell.value_or(0.0), s.timings.threads.value_or(0));
  }
}

void print_summary(const Profile& p, const std::string& path, bool json) {
  const ProfileSummary s = summarize_profile(p);
  if (json) {
    std::printf("%s\n", json_text(profile_summary_to_json(s), 2).c_str());
  } else {
    print_summary_text(p, s, path);
  }
}

void run_profile_command(const ProfileCommandOptions& o) {
  if (o.model.empty()) fail(ErrorCode::kInvalidArgument, "--model is required");
  if (o.output.empty()) fail(ErrorCode::kInvalidArgument, "-o/--output is required");
  pipeline::ProfileRequest request = profile_request_from_flags(o.profile);
  ProfileOptions& opt = request.options;
  if (!o.shard.empty()) parse_shard(o.shard, opt.shard_index, opt.shard_count);
  std::unique_ptr<Profile> resume;
  if (o.resume && std::filesystem::exists(o.output)) {
    resume = std::make_unique<Profile>(read_profile(o.output));
    opt.resume = resume.get();
    spdlog::info("resuming {}: {} of {} cells present", o.output, resume->n_present(),
                 resume->n_cells());
  }

  ProgressPrinter printer(stderr);
  opt.progress = [&](const ProfileProgress& p) { printer.update(p); };
  opt.checkpoint = [&](const Profile& partial) { write_profile(o.output, partial); };
  const Profile profile = pipeline::profile_model(o.model, request);
  printer.finish();
  write_profile(o.output, profile);
  print_summary(profile, o.output, o.json);
}

void run_merge_command(const MergeCommandOptions& o) {
  std::vector<Profile> shards;
  for (const std::string& path : o.inputs) shards.push_back(read_profile(path));
  const Profile merged = merge_profiles(shards, o.inputs);
  write_profile(o.output, merged);
  if (o.json) {
    print_summary(merged, o.output, true);
  } else {
    std::printf("merged       %zu shards -> %s\n", shards.size(), o.output.c_str());
    print_summary(merged, o.output, false);
  }
}

}  // namespace

void register_profile_command(CLI::App& app) {
  auto o = std::make_shared<ProfileCommandOptions>();
  auto m = std::make_shared<MergeCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "Measure each layer's sensitivity to K/V quantization (KVTuner metrics)");
  cmd->footer(
      "Example: kvplan profile --model SmolLM2-135M-Instruct.Q4_1.gguf -o profile.json\n"
      "         kvplan profile --model m.gguf --candidates KV8,K8V4,KV4,q8_0/q4_0 --mode kivi "
      "-o p.json\n"
      "Sharded: kvplan profile --model m.gguf --shard 0/3 -o s0.json   (also 1/3, 2/3)\n"
      "         kvplan profile merge -o profile.json s0.json s1.json s2.json\n"
      "Default calibration: configs/calibration/default.jsonl. Metrics: src/profile/metrics.h;\n"
      "see docs/profiling-at-scale.md for Slurm and Kubernetes.");
  cmd->add_option("--model", o->model, "A .gguf file or an HF model directory");
  add_profile_flags(cmd, o->profile);
  cmd->add_option("--shard", o->shard, "Compute shard i of n (0-based), e.g. 2/8");
  cmd->add_flag("--resume", o->resume, "Keep the cells already in the -o file, compute the rest");
  cmd->add_option("-o,--output", o->output, "profile.json to write (atomically)");
  cmd->add_flag("--json", o->json, "Print the summary as JSON");

  CLI::App* merge = cmd->add_subcommand("merge", "Join shard profiles into one profile.json");
  merge->footer("Example: kvplan profile merge -o profile.json shard-*.json");
  merge->add_option("-o,--output", m->output, "Merged profile.json")->required();
  merge->add_option("shards", m->inputs, "Shard files")->required();
  merge->add_flag("--json", m->json, "Print the summary as JSON");
  merge->callback([m] { run_merge_command(*m); });
  cmd->callback([o, cmd, merge] {
    if (merge->parsed()) return;
    (void)cmd;
    run_profile_command(*o);
  });
}

}  // namespace kvplan::cli
