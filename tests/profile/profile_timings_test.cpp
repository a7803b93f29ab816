// profile_timings: the typed "timings" of profile.json — the order kvplan writes, committed
// profiles reading and writing back byte for byte, merged profiles' per-shard entries, and the
// one-line errors for mistyped fields.
#include "profile/profile_timings.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_text.h"
#include "profile/profile_data.h"

namespace kvplan {
namespace {

std::filesystem::path reference_dir() {
  return std::filesystem::path(KVPLAN_SOURCE_DIR) / "data" / "reference";
}

// The keys of a JSON object in their written order.
std::vector<std::string> keys_of(const nlohmann::ordered_json& j) {
  std::vector<std::string> out;
  for (const auto& [key, value] : j.items()) out.push_back(key);
  return out;
}

TEST(ProfileTimings, CommittedProfilesReadAndWriteBackByteForByte) {
  int profiles = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(reference_dir())) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("profile") || entry.path().extension() != ".json") continue;
    const std::string text = read_text_file(entry.path());
    // EXPECT_TRUE, not EXPECT_EQ: a failure names the file instead of printing two profiles.
    EXPECT_TRUE(profile_text(read_profile(entry.path())) == text)
        << entry.path() << " changes when read and written back";
    ++profiles;
  }
  EXPECT_GE(profiles, 3);
}

TEST(ProfileTimings, CommittedProfileTimingsAreTyped) {
  const Profile p = read_profile(reference_dir() / "stories260k" / "profile.json");
  const ProfileTimings& t = p.timings;
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.build, (BuildRecord{"x86-64-v3", "AVX2 FMA F16C", "GCC 12.2.0", "3.4.0"}));
  EXPECT_EQ(t.attention_device, "cpu");
  EXPECT_EQ(t.cells_computed, 170);
  EXPECT_EQ(t.reference_s, 0.439917311);
  EXPECT_EQ(t.metrics_s, 5.715020556999999);
  EXPECT_EQ(t.dkl_s, 1.202710307);
  EXPECT_EQ(t.total_s, 7.363937075);
  EXPECT_EQ(t.seconds_per_cell, 0.04331727691176471);
  EXPECT_EQ(t.load_s, 0.001123252);
  EXPECT_TRUE(t.shards.empty());
  const nlohmann::ordered_json j = timings_to_json(t);
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{
                            "threads", "build", "attention_device", "cells_computed", "reference_s",
                            "metrics_s", "dkl_s", "total_s", "seconds_per_cell", "load_s"}));
}

TEST(ProfileTimings, OnlyTheFieldsSetAreWritten) {
  EXPECT_EQ(json_text(timings_to_json({}), 1), "{}");
  // A run that found every cell already present (resumed), then loaded by `kvplan profile`.
  ProfileTimings t;
  t.load_s = 0.25;
  t.threads = 4;
  EXPECT_EQ(json_text(timings_to_json(t), -1), R"({"threads":4,"load_s":0.25})");
  t.total_s = 3.0;
  EXPECT_EQ(json_text(timings_to_json(t), -1), R"({"threads":4,"total_s":3.0,"load_s":0.25})");
}

TEST(ProfileTimings, TheBuildFollowsTheThreadsAndReadsBack) {
  ProfileTimings t;
  t.threads = 2;
  t.total_s = 1.0;
  t.build = BuildRecord{"x86-64-v3", "AVX2 FMA", "GCC 12.2.0", "3.4.0"};
  const nlohmann::ordered_json j = timings_to_json(t);
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"threads", "build", "total_s"}));
  const nlohmann::json plain(j);
  EXPECT_EQ(timings_from_json(JsonFields(plain, "profile.json", "timings")), t);
}

TEST(ProfileTimings, MergedTimingsListEachShardWithItsFile) {
  ProfileTimings shard;
  shard.threads = 8;
  shard.cells_computed = 12;
  shard.total_s = 1.5;
  ProfileTimings merged;
  merged.shards.push_back({shard, "s0.json", "0/2"});
  shard.cells_computed = 11;
  merged.shards.push_back({shard, "s1.json", "1/2"});
  const nlohmann::ordered_json j = timings_to_json(merged);
  EXPECT_EQ(json_text(j, -1),
            R"({"shards":[{"threads":8,"cells_computed":12,"total_s":1.5,"file":"s0.json",)"
            R"("shard":"0/2"},{"threads":8,"cells_computed":11,"total_s":1.5,"file":"s1.json",)"
            R"("shard":"1/2"}]})");
  const nlohmann::json parsed = nlohmann::json::parse(json_text(j, 1));
  EXPECT_EQ(timings_from_json(JsonFields(parsed, "p.json", "timings")), merged);
}

void expect_error(const nlohmann::json& timings, const std::string& fragment) {
  try {
    (void)timings_from_json(JsonFields(timings, "p.json", "timings"));
    ADD_FAILURE() << "accepted " << timings.dump() << "; wanted an error with " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ProfileTimings, MistypedFieldsNameTheField) {
  expect_error({{"threads", "two"}}, "p.json: field 'timings.threads'");
  expect_error({{"threads", -1}}, "timings.threads");
  expect_error({{"total_s", "1.5"}}, "timings.total_s");
  expect_error({{"attention_device", 1}}, "timings.attention_device");
  nlohmann::json shard_without_file = {{"threads", 2}};
  nlohmann::json merged;
  merged["shards"] = nlohmann::json::array({shard_without_file});
  expect_error(merged, "timings.shards[0].file");
  expect_error(nlohmann::json::array(), "timings");
}

}  // namespace
}  // namespace kvplan
