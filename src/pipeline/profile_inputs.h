// What a profile runs on: the model, its tokenizer and the tokenized calibration prompts, loaded
// prompts first so that a bad prompts file fails before the (possibly large) model is read.
//
//   ProfileInputs in = load_profile_inputs("model.gguf", {.file = "default.jsonl"});
//   in.calibration.prompts;  in.weights.config;
#pragma once

#include <filesystem>
#include <memory>

#include "model/model_weights.h"
#include "model/tokenizer/tokenizer.h"
#include "profile/calibration.h"

namespace kvplan::pipeline {

struct CalibrationRequest {
  std::filesystem::path file;  // text or JSONL (profile/calibration.h)
  CalibrationOptions options;  // tokens per prompt, prompts used
};

struct ProfileInputs {
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  CalibrationSet calibration;
  double load_s = 0;  // loading the model and tokenizer
};

ProfileInputs load_profile_inputs(const std::filesystem::path& model,
                                  const CalibrationRequest& calibration);

}  // namespace kvplan::pipeline
