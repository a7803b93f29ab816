// profile.json (written by kvplan profile, possibly on another machine, read by search and merge):
// parse, validate, and write back.
#include "fuzz/fuzz_target.h"
#include "profile/profile_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvplan;
  fuzz::refused_or_ok([&] {
    const Profile profile = profile_from_text(fuzz::as_text(data, size), "fuzz/profile.json");
    (void)profile_text(profile);
  });
  return 0;
}
