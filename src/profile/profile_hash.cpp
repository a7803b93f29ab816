#include "profile/profile_hash.h"

#include "core/hash.h"

namespace kvplan {

std::string profile_hash(const Profile& profile) {
  // Converted to an unordered json (keys sorted) as plans written so far were hashed that way.
  nlohmann::json j = profile_to_json(profile);
  j.erase("timings");
  return hash_hex(hash64(j.dump()));
}

}  // namespace kvplan
