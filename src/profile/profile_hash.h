// A profile's identity hash, recorded in plans (provenance.profile.hash) and checked by the report
// generator so that a report is never drawn from a profile other than the one a plan was tuned on.
//
//   const std::string h = kvplan::profile_hash(kvplan::read_profile("profile.json"));
#pragma once

#include <string>

#include "profile/profile_data.h"

namespace kvplan {

// hash_hex(hash64(...)) of the profile's JSON without "timings": the machine-dependent seconds
// differ between reruns and between a merged and an unsharded profile of the same experiment.
std::string profile_hash(const Profile& profile);

}  // namespace kvplan
