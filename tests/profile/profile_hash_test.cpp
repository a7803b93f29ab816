// profile_hash: the identity plans record and the report generator checks.
#include "profile/profile_hash.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "profile/profile_data.h"

namespace kvplan {
namespace {

std::filesystem::path reference(const char* model, const char* file) {
  return std::filesystem::path(KVPLAN_SOURCE_DIR) / "reports" / model / file;
}

TEST(ProfileHash, MatchesTheHashCommittedPlansRecorded) {
  // plan-320.json's provenance.profile.hash was written by `kvplan tune` from this profile: the
  // hash must not change with refactoring, or every committed plan stops matching its profile.
  const Profile p = read_profile(reference("stories260k", "profile.json"));
  EXPECT_EQ(profile_hash(p), "65b48487ce4fbcaf");
}

TEST(ProfileHash, IgnoresTimingsButNotMetrics) {
  Profile p = read_profile(reference("stories260k", "profile.json"));
  const std::string h = profile_hash(p);
  p.timings = {{"total_s", 12345.5}, {"threads", 7}};
  EXPECT_EQ(profile_hash(p), h);
  ASSERT_NE(p.cells.at(0).at(0), std::nullopt);
  p.cells[0][0]->metrics.dkl += 1e-9;
  EXPECT_NE(profile_hash(p), h);
}

}  // namespace
}  // namespace kvplan
