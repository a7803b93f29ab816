#include "profile/profile_timings.h"

#include <cstdint>

namespace kvplan {
namespace {

using OJson = nlohmann::ordered_json;

template <typename T>
void put(OJson& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

}  // namespace

bool ProfileTimings::operator==(const ProfileTimings&) const = default;

nlohmann::ordered_json timings_to_json(const ProfileTimings& t) {
  OJson j = OJson::object();
  put(j, "threads", t.threads);
  if (t.build) j["build"] = build_record_to_json(*t.build);
  put(j, "attention_device", t.attention_device);
  put(j, "cells_computed", t.cells_computed);
  put(j, "reference_s", t.reference_s);
  put(j, "metrics_s", t.metrics_s);
  put(j, "dkl_s", t.dkl_s);
  put(j, "total_s", t.total_s);
  put(j, "seconds_per_cell", t.seconds_per_cell);
  put(j, "load_s", t.load_s);
  if (!t.shards.empty()) {
    OJson shards = OJson::array();
    for (const ShardTimings& s : t.shards) {
      OJson entry = timings_to_json(s.run);
      entry["file"] = s.file;
      entry["shard"] = s.shard;
      shards.push_back(std::move(entry));
    }
    j["shards"] = std::move(shards);
  }
  return j;
}

ProfileTimings timings_from_json(const JsonFields& f) {
  if (!f.value().is_object()) f.expected("a JSON object");
  ProfileTimings t;
  if (const auto v = f.optional_integer("threads", 0, INT32_MAX)) t.threads = static_cast<int>(*v);
  if (const auto b = f.optional_object("build")) t.build = build_record_from_json(*b);
  t.attention_device = f.optional_string("attention_device");
  t.cells_computed = f.optional_integer("cells_computed", 0, INT64_MAX);
  t.reference_s = f.optional_number("reference_s");
  t.metrics_s = f.optional_number("metrics_s");
  t.dkl_s = f.optional_number("dkl_s");
  t.total_s = f.optional_number("total_s");
  t.seconds_per_cell = f.optional_number("seconds_per_cell");
  t.load_s = f.optional_number("load_s");
  if (const auto shards = f.optional_array("shards")) {
    for (size_t i = 0; i < shards->size(); ++i) {
      const JsonFields entry = shards->element(i);
      t.shards.push_back({timings_from_json(entry), entry.string("file"), entry.string("shard")});
    }
  }
  return t;
}

}  // namespace kvplan
