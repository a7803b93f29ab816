// profile_hash: the identity plans record and the report generator checks.
#include "profile/profile_hash.h"

#include <filesystem>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "profile/profile_data.h"

namespace kvplan {
namespace {

std::filesystem::path reference(const char* model, const char* file) {
  return std::filesystem::path(KVPLAN_SOURCE_DIR) / "data" / "reference" / model / file;
}

TEST(ProfileHash, MatchesTheHashCommittedPlansRecorded) {
  // Each committed plan's provenance.profile.hash was written by `kvplan tune` from the profile
  // beside it: the hash must not change with refactoring, or every committed plan stops matching
  // its profile.
  int plans = 0;
  for (const char* model : {"stories260k", "smollm2-135m"}) {
    const std::string hash = profile_hash(read_profile(reference(model, "profile.json")));
    for (const auto& entry : std::filesystem::directory_iterator(reference(model, ""))) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("plan-", 0) != 0 || entry.path().extension() != ".json") continue;
      const nlohmann::json plan = nlohmann::json::parse(read_text_file(entry.path()));
      EXPECT_EQ(plan["provenance"]["profile"]["hash"], hash) << entry.path();
      ++plans;
    }
  }
  EXPECT_GE(plans, 5);
}

// The references are made by the default build (-DKVPLAN_ISA=x86-64-v3), whose plans any CPU with
// AVX2 and FMA reproduces bit for bit; a -march=native build's would be its machine's alone
// (docs/determinism.md, scripts/ci/regenerate-references.sh refuses to write them).
TEST(ProfileHash, CommittedReferencesWereMadeByThePortableBuild) {
  int files = 0;
  for (const char* model : {"stories260k", "smollm2-135m", "gemma3-270m"}) {
    const Profile profile = read_profile(reference(model, "profile.json"));
    ASSERT_TRUE(profile.timings.build.has_value()) << model;
    EXPECT_EQ(profile.timings.build->isa, "x86-64-v3") << model;
    ++files;
    for (const auto& entry : std::filesystem::directory_iterator(reference(model, ""))) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("plan-", 0) != 0 || entry.path().extension() != ".json") continue;
      const nlohmann::json plan = nlohmann::json::parse(read_text_file(entry.path()));
      EXPECT_EQ(plan["provenance"]["build"]["isa"], "x86-64-v3") << entry.path();
      ++files;
    }
  }
  EXPECT_GE(files, 10);
}

TEST(ProfileHash, IgnoresTimingsButNotMetrics) {
  Profile p = read_profile(reference("stories260k", "profile.json"));
  const std::string h = profile_hash(p);
  p.timings.total_s = 12345.5;
  p.timings.threads = 7;
  EXPECT_EQ(profile_hash(p), h);
  ASSERT_NE(p.cells.at(0).at(0), std::nullopt);
  p.cells[0][0]->metrics.dkl += 1e-9;
  EXPECT_NE(profile_hash(p), h);
}

}  // namespace
}  // namespace kvplan
