// profile.json's "timings": how long a profile run took and on what, machine-dependent, so outside
// the profile's hash (profile_hash.h) and always the file's last field.
//
// Only the fields set are written, in the order of the struct: a run writes threads and build,
// then (once a cell is done) attention_device ... total_s, seconds_per_cell when it finishes, and
// the commands that load the model add load_s; a merged profile writes only `shards`, each shard's
// own timings followed by its file name and "i/n". Reading keeps what kvplan wrote, so a profile
// reads and writes back byte for byte; keys kvplan never wrote are not kept.
//
//   ProfileTimings t;
//   t.threads = 8;
//   t.total_s = 12.5;
//   nlohmann::ordered_json j = timings_to_json(t);  // {"threads": 8, "total_s": 12.5}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/build_record.h"
#include "core/json_fields.h"

namespace kvplan {

struct ShardTimings;

struct ProfileTimings {
  std::optional<int> threads;
  std::optional<BuildRecord> build;  // the binary that ran it
  // Also Profile::attention_device; files written before that field existed have it only here.
  std::optional<std::string> attention_device;
  std::optional<int64_t> cells_computed;
  std::optional<double> reference_s, metrics_s, dkl_s, total_s;  // since the run started
  std::optional<double> seconds_per_cell;
  std::optional<double> load_s;      // loading the model, before the run
  std::vector<ShardTimings> shards;  // a merged profile: one per shard file, in the merge's order

  bool operator==(const ProfileTimings&) const;
};

struct ShardTimings {
  ProfileTimings run;
  std::string file;   // the shard's file name, without directories
  std::string shard;  // "i/n"

  bool operator==(const ShardTimings&) const = default;
};

nlohmann::ordered_json timings_to_json(const ProfileTimings& timings);
// Throws Error(kInvalidArgument) naming the field (e.g. 'timings.threads') for a value of the
// wrong type, and for a shard entry without its file or shard.
ProfileTimings timings_from_json(const JsonFields& timings);

}  // namespace kvplan
