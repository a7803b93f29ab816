#include "profile/shard_merge.h"

#include <set>

#include "core/error.h"
#include "profile/dkl_estimate.h"

namespace kvplan {

Profile merge_profiles(const std::vector<Profile>& shards, const std::vector<std::string>& names,
                       bool allow_incomplete) {
  if (shards.empty()) fail(ErrorCode::kInvalidArgument, "profile merge: no shard files given");
  if (names.size() != shards.size()) {
    fail(ErrorCode::kInternal, "merge_profiles: {} shards, {} names", shards.size(), names.size());
  }
  const Profile& first = shards[0];
  Profile out = first;
  out.shard_index = 0;
  out.shard_count = 1;
  out.reset_cells();
  std::set<int> seen_index;
  ProfileTimings timings;
  for (size_t s = 0; s < shards.size(); ++s) {
    const Profile& p = shards[s];
    const std::string diff = profile_identity_mismatch(first, p);
    if (!diff.empty()) {
      fail(ErrorCode::kInvalidArgument, "{}: does not match {}: {}", names[s], names[0], diff);
    }
    if (p.kv_absmax != first.kv_absmax) {
      fail(ErrorCode::kInvalidArgument,
           "{}: field 'kv_absmax' differs from {}'s: the shards' reference passes disagree",
           names[s], names[0]);
    }
    if (p.shard_count != first.shard_count) {
      fail(ErrorCode::kInvalidArgument, "{}: field 'shard.count' is {}, {} has {}", names[s],
           p.shard_count, names[0], first.shard_count);
    }
    if (!seen_index.insert(p.shard_index).second) {
      fail(ErrorCode::kInvalidArgument, "{}: shard {}/{} was already given", names[s],
           p.shard_index, p.shard_count);
    }
    for (size_t l = 0; l < p.cells.size(); ++l) {
      for (size_t c = 0; c < p.cells[l].size(); ++c) {
        if (!p.cells[l][c]) continue;
        out.cells[l][c] = p.cells[l][c];
      }
    }
    timings.shards.push_back({p.timings, std::filesystem::path(names[s]).filename().string(),
                              fmt::format("{}/{}", p.shard_index, p.shard_count)});
  }
  if (!allow_incomplete) {
    size_t missing = 0;
    std::string example;
    for (size_t l = 0; l < out.cells.size(); ++l) {
      for (size_t c = 0; c < out.cells[l].size(); ++c) {
        if (out.cells[l][c]) continue;
        if (missing++ == 0) {
          example = fmt::format(
              "layer {} pair {} (shard {}/{})", l, out.candidates[c].name(),
              shard_of_cell(static_cast<int>(l), c, out.candidates.size(), first.shard_count),
              first.shard_count);
        }
      }
    }
    if (missing > 0) {
      fail(ErrorCode::kInvalidArgument,
           "profile merge: {} of {} cells are missing, first {}; give every shard's file", missing,
           out.n_cells(), example);
    }
  }
  out.timings = std::move(timings);
  // A layer's anchors may have been in another shard than its estimated cells.
  estimate_unmeasured_dkl(out);
  return out;
}

}  // namespace kvplan
