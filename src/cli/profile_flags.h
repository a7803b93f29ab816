// Flags shared by `kvplan profile` and `kvplan tune`: the calibration prompts, the candidate pairs,
// the quantization settings of the profile and the device — their translation into
// ProfileOptions, and the model and calibration set they name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "model/model_weights.h"
#include "model/tokenizer/tokenizer.h"
#include "profile/calibration.h"
#include "profile/profiler.h"

namespace kvplan::cli {

struct ProfileFlags {
  std::string prompts, candidates, formats, mode = "per-token";
  int64_t group_size = 32, residual_length = 32;
  int max_tokens = 128, num_prompts = 0, kl_prompts = 8, threads = 0;
  bool exact_chunk = false;
  bool all_dkl = false;
  std::string device = "auto";  // --device auto|cpu|gpu[:N]
};

void add_profile_flags(CLI::App* cmd, ProfileFlags& flags);

// Throws Error(kInvalidArgument) naming the flag. Resolves --device (one log line): on a GPU the
// attention-side metrics (packing, probabilities, outputs) run as HIP kernels, the model's forward
// passes (captures, dKL) on the CPU.
ProfileOptions profile_options_from_flags(const ProfileFlags& flags);

// --prompts, or configs/calibration/default.jsonl.
std::filesystem::path calibration_path(const ProfileFlags& flags);

CalibrationOptions calibration_options(const ProfileFlags& flags);

// What a profile runs on: the model, its tokenizer and the tokenized calibration prompts.
struct ProfileInputs {
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  CalibrationSet calibration;
  double load_s = 0;  // loading the model and tokenizer
};
// Reads the prompts before the (possibly large) model, so a bad prompts file fails at once.
ProfileInputs load_profile_inputs(const std::string& model, const ProfileFlags& flags);

}  // namespace kvplan::cli
