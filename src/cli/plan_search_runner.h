// The part `kvplan search` and `kvplan tune` share: from a complete profile and the loaded model,
// load the selection and report texts (refusing overlapping sets), search, validate on selection,
// measure on report, write plan.json and print what was chosen.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/search_flags.h"
#include "model/model_weights.h"
#include "model/tokenizer/tokenizer.h"
#include "profile/calibration.h"
#include "profile/profile_data.h"

namespace kvplan::cli {

// The selection and report texts in windows of --ctx tokens, checked to be disjoint from each
// other and from the calibration file when it is given (Error kInvalidArgument naming both
// files otherwise). Overlap is judged on the files' text, whatever the tokenizer: an identical
// sample, or a run of kOverlapBytes bytes that two samples share.
struct PlanTexts {
  CalibrationSet selection, report;
  // The report samples joined by blank lines and tokenized once with BOS (long-context KL).
  std::vector<int32_t> report_stream;
  std::optional<int32_t> bos_id;
};
inline constexpr size_t kOverlapBytes = 64;
PlanTexts load_plan_texts(const SearchFlags& flags, const Tokenizer& tokenizer,
                          const ModelConfig& config, const std::filesystem::path* calibration_file);

void search_and_write_plan(const Profile& profile, const ModelWeights& weights,
                           const PlanTexts& texts, const SearchFlags& flags,
                           const std::string& output, bool json);

}  // namespace kvplan::cli
