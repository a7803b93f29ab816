// Flags shared by `kvplan profile` and `kvplan tune`: the calibration prompts, the candidate pairs
// and the quantization settings of the profile — and their translation into ProfileOptions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "profile/calibration.h"
#include "profile/profiler.h"

namespace kvplan::cli {

struct ProfileFlags {
  std::string prompts, candidates, mode = "per-token";
  int64_t group_size = 32, residual_length = 32;
  int max_tokens = 128, num_prompts = 0, kl_prompts = 8, threads = 0;
  bool exact_chunk = false;
};

void add_profile_flags(CLI::App* cmd, ProfileFlags& flags);

// Throws Error(kInvalidArgument) naming the flag.
ProfileOptions profile_options_from_flags(const ProfileFlags& flags);

// --prompts, or configs/calibration/default.jsonl.
std::filesystem::path calibration_path(const ProfileFlags& flags);

CalibrationOptions calibration_options(const ProfileFlags& flags);

}  // namespace kvplan::cli
