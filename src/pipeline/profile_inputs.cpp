#include "pipeline/profile_inputs.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "model/load_tokenizer.h"

namespace kvplan::pipeline {

ProfileInputs load_profile_inputs(const std::filesystem::path& model,
                                  const CalibrationRequest& calibration) {
  const std::vector<CalibrationItem> items = read_calibration_file(calibration.file);
  const auto load_start = std::chrono::steady_clock::now();
  ProfileInputs in{.weights = load_model_weights(model),
                   .tokenizer = load_model_tokenizer(model),
                   .calibration = {}};
  in.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  spdlog::info("loaded {} ({} layers) in {:.2f} s", in.weights.config.name,
               in.weights.config.n_layers, in.load_s);
  in.calibration = tokenize_calibration(items, calibration.file.string(), *in.tokenizer,
                                        in.weights.config, calibration.options);
  spdlog::info("calibration {}: {} prompts, {} tokens", calibration.file.string(),
               in.calibration.prompts.size(), in.calibration.n_tokens);
  return in;
}

}  // namespace kvplan::pipeline
