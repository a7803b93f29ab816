// Joining the shards of a profile (`kvplan profile --shard i/n` on many machines) into one
// profile.json, byte-identical to an unsharded run's apart from the `timings` field.
//
//   kvplan::Profile p = kvplan::merge_profiles({read_profile("s0.json"), read_profile("s1.json")},
//                                              {"s0.json", "s1.json"});
#pragma once

#include <string>
#include <vector>

#include "profile/profile_data.h"

namespace kvplan {

// Refuses (Error kInvalidArgument, naming the file and the field) shards of another model,
// calibration, settings or candidate list, of different shard counts, a shard given twice, cells
// that two shards disagree on, and — unless `allow_incomplete` — any (layer, pair) cell missing
// from all shards. The result is a complete, unsharded profile; its `timings` holds each shard's
// timings under "shards".
Profile merge_profiles(const std::vector<Profile>& shards, const std::vector<std::string>& names,
                       bool allow_incomplete = false);

}  // namespace kvplan
