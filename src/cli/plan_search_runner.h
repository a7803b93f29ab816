// The part `kvplan search` and `kvplan tune` share: from a complete profile and the loaded model,
// measure on the held-out prompts, search, validate, write plan.json and print what was chosen.
#pragma once

#include <string>

#include "cli/search_flags.h"
#include "model/model_weights.h"
#include "model/tokenizer/tokenizer.h"
#include "profile/profile_data.h"

namespace kvplan::cli {

void search_and_write_plan(const Profile& profile, const ModelWeights& weights,
                           const Tokenizer& tokenizer, const SearchFlags& flags,
                           const std::string& output, bool json);

}  // namespace kvplan::cli
