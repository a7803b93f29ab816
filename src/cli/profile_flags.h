// Flags shared by `kvplan profile` and `kvplan tune`: the calibration prompts, the candidate pairs,
// the quantization settings of the profile and the device — parsed once into a
// pipeline::ProfileRequest.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "pipeline/tune.h"

namespace kvplan::cli {

struct ProfileFlags {
  std::string prompts, candidates, formats, mode = "per-token";
  int64_t group_size = 32, residual_length = 32;
  int max_tokens = 128, num_prompts = 0, kl_prompts = 8, threads = 0;
  bool exact_chunk = false;
  bool all_dkl = false;
  bool per_head_dkl = false;
  std::string device = "auto";  // --device auto|cpu|gpu[:N]
};

void add_profile_flags(CLI::App* cmd, ProfileFlags& flags);

// Throws Error(kInvalidArgument) naming the flag. Resolves --device (one log line): on a GPU the
// attention-side metrics (packing, probabilities, outputs) run as HIP kernels, the model's forward
// passes (captures, dKL) on the CPU. The calibration file is --prompts, or
// configs/calibration/default.jsonl.
pipeline::ProfileRequest profile_request_from_flags(const ProfileFlags& flags);

}  // namespace kvplan::cli
