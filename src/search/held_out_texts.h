// The selection and report texts of a search, read and checked: cut into windows of `ctx` tokens,
// disjoint from each other and from the calibration text (Error kInvalidArgument naming both files
// otherwise). Overlap is judged on the files' text, whatever the tokenizer: an identical sample,
// or a run of kOverlapBytes bytes that two samples share.
//
//   HeldOutTexts t = load_held_out_texts({.selection = "selection.jsonl",
//                                         .report = "report.jsonl"}, tokenizer, config, &calib);
//   t.selection.prompts;  t.report_stream;
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "model/model_config.h"
#include "model/tokenizer/tokenizer.h"
#include "profile/calibration.h"

namespace kvplan::search {

inline constexpr size_t kOverlapBytes = 64;

struct HeldOutTextsRequest {
  std::filesystem::path selection;  // chooses among validated plans
  std::filesystem::path report;     // measures the chosen plan and the baselines
  int ctx = 1024;                   // tokens per window
  int windows_per_sample = 1;       // 0: every window of a sample
  bool allow_overlap = false;
};

struct HeldOutTexts {
  CalibrationSet selection, report;
  // The report samples joined by blank lines and tokenized once with BOS (long-context KL).
  std::vector<int32_t> report_stream;
  std::optional<int32_t> bos_id;
};

// `calibration_file`: the profile's calibration text, checked too when given.
HeldOutTexts load_held_out_texts(const HeldOutTextsRequest& request, const Tokenizer& tokenizer,
                                 const ModelConfig& config,
                                 const std::filesystem::path* calibration_file);

}  // namespace kvplan::search
