#include "cli/profile_flags.h"

#include <filesystem>

#include "cli/cli_util.h"
#include "cli/device_option.h"
#include "core/error.h"
#include "profile/candidate_lists.h"

namespace kvplan::cli {

void add_profile_flags(CLI::App* cmd, ProfileFlags& f) {
  cmd->add_option("--prompts", f.prompts,
                  "Calibration: text (prompts separated by blank lines) or JSONL with "
                  "{\"text\"}, {\"messages\"} or {\"tokens\"} (default: the built-in set)");
  cmd->add_option("--candidates", f.candidates,
                  "Comma-separated pairs (K8V4,KV4,q8_0/q4_0,fp8_e4m3/int4), or 'kvtuner' for "
                  "K{8,4,2} x V{8,4,2} int (default: every catalogue format for keys and for "
                  "values independently)");
  cmd->add_option("--formats", f.formats,
                  "Comma-separated formats, each searched for keys and for values independently "
                  "(default: every format `kvplan formats` lists without a *; 'all': every "
                  "format but f32)");
  cmd->add_flag("--all-dkl", f.all_dkl,
                "Default catalogue: re-run the model for every side's dKL instead of estimating "
                "it from the anchors (slower)");
  cmd->add_flag("--per-head-dkl", f.per_head_dkl,
                "Also re-run each dKL anchor with one KV head alone quantized, per head: what "
                "`search --per-head` ranks heads by (1 + KV heads times the dKL re-runs; `tune "
                "--per-head` turns it on)");
  cmd->add_option("--mode", f.mode, "per-token (default) or kivi");
  cmd->add_option("--group-size", f.group_size, "Quantization group (default 32)");
  cmd->add_option("--residual-length", f.residual_length,
                  "kivi: full-precision window, a multiple of the group (default 32)");
  cmd->add_option("--max-tokens", f.max_tokens,
                  "Tokens per prompt, BOS included; longer prompts are truncated (default 128)");
  cmd->add_option("--num-prompts", f.num_prompts, "Use the first N prompts (default: all)");
  cmd->add_option("--kl-prompts", f.kl_prompts,
                  "Prompts dKL re-runs, evenly spaced (default 8; 0 = all)");
  cmd->add_option("--threads", f.threads, "Worker threads (default: all cores)");
  cmd->add_flag("--exact-chunk", f.exact_chunk,
                "A prompt's own attention reads exact K/V (KIVI prefill; default: quantized)");
  add_device_option(cmd, &f.device);
}

pipeline::ProfileRequest profile_request_from_flags(const ProfileFlags& f) {
  if (f.group_size <= 0 || f.residual_length <= 0) {
    fail(ErrorCode::kInvalidArgument, "--group-size and --residual-length must be positive");
  }
  pipeline::ProfileRequest r;
  r.calibration = {.file = f.prompts.empty() ? config_dir() / "calibration" / "default.jsonl"
                                             : std::filesystem::path(f.prompts),
                   .options = {.max_tokens = f.max_tokens, .num_prompts = f.num_prompts}};
  ProfileOptions& opt = r.options;
  opt.settings.mode = parse_quant_mode(f.mode);
  opt.settings.group_size = static_cast<size_t>(f.group_size);
  opt.settings.residual_length = static_cast<size_t>(f.residual_length);
  opt.settings.round_block_to_group();  // the plans searched from this profile take its pages
  opt.settings.validate();
  if (f.candidates == "kvtuner") {
    opt.candidates = kvtuner_candidates();
  } else if (!f.candidates.empty()) {
    opt.candidates = parse_candidates(f.candidates);
  }
  if (!f.formats.empty()) {
    if (!opt.candidates.empty()) {
      fail(ErrorCode::kInvalidArgument,
           "--formats and --candidates: give one (--formats searches keys and values "
           "independently, --candidates lists the pairs)");
    }
    opt.formats = parse_format_list(f.formats);
  }
  opt.all_dkl = f.all_dkl;
  opt.per_head_dkl = f.per_head_dkl;
  opt.kl_prompts = f.kl_prompts;
  opt.threads = f.threads;
  opt.chunk_attends_quantized = !f.exact_chunk;
  opt.tool_version = KVPLAN_VERSION;
  const DeviceChoice device = resolve_device_option(f.device);
  if (device.use_gpu) opt.gpu_device = device.index;
  return r;
}

}  // namespace kvplan::cli
