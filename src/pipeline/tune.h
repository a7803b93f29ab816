// The main job as one call (docs/architecture.md §3): `kvplan tune` is tune(TuneRequest) — load
// the model and the texts, check every input before the long profile (the budget against the
// smallest plan the formats allow, the texts disjoint), profile, search, record — and `kvplan
// search` is search_profile() on a saved profile. The CLI parses its flags once into these
// requests and prints the TunedPlan; tests drive the same calls.
//
//   TuneRequest r;  r.model = "SmolLM2-135M-Instruct.Q4_1.gguf";
//   r.search.budget = BudgetRequest::bytes_per_token(6480);
//   TunedPlan t = tune(r);
//   write_plan("plan.json", t.plan);
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "formats/budget.h"
#include "pipeline/profile_inputs.h"
#include "plan/plan.h"
#include "profile/profile_data.h"
#include "profile/profiler.h"
#include "search/choose_plan.h"
#include "search/held_out_texts.h"
#include "search/plan_record.h"

namespace kvplan::pipeline {

struct SearchRequest {
  BudgetRequest budget;
  search::SearchOptions options;
  search::HeldOutTextsRequest texts;
  // The plan and the best uniform baseline at long contexts on the report text read as one
  // stream (tokens_per_context 0 or no contexts: not measured).
  search::LongContextKl::Options long_context;
  search::RecordStamp stamp;
  // Plans of the same model and quantization measured on the report text beside the chosen one.
  std::vector<std::filesystem::path> compare_plans{};
  // Held-out measurements read from and added to this file (search/measurement_store.h); empty:
  // every configuration is measured.
  std::filesystem::path measurements{};
};

struct ProfileRequest {
  CalibrationRequest calibration;
  ProfileOptions options;  // its progress callback reports the profile's progress
  // Called with the finished profile before the search starts, so that the expensive part is kept
  // (written) even when the search then fails.
  std::function<void(const Profile&)> on_profile;
};

struct TuneRequest {
  std::filesystem::path model;  // a .gguf file or an HF model directory
  ProfileRequest profile;
  SearchRequest search;
};

struct TunedPlan {
  Profile profile;
  Plan plan;
  search::SearchOutcome outcome;
  Budget budget;                            // as resolved on the model
  std::string selection_file, report_file;  // as given
};

// `kvplan profile`: loads `model` and the calibration prompts and profiles them, with
// request.options' callbacks (progress, checkpoint, resume); timings.load_s is the loading time.
// Throws Error(kInvalidArgument) naming the input for a bad model or prompts.
Profile profile_model(const std::filesystem::path& model, const ProfileRequest& request);

// Throws Error(kInvalidArgument) naming the input for a bad model, prompts, texts or budget —
// all checked before the profile runs.
TunedPlan tune(const TuneRequest& request);

// `kvplan search`: the search half on `profile` (complete, of `model`). `calibration`: the text
// the profile was made on, for the overlap check; nullopt: the default calibration text when its
// tokens hash to the profile's, else the check leaves it out (logged).
TunedPlan search_profile(Profile profile, const std::filesystem::path& model,
                         const SearchRequest& request,
                         const std::optional<std::filesystem::path>& calibration,
                         const std::filesystem::path& default_calibration);

}  // namespace kvplan::pipeline
