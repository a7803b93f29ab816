// plan.json (written by kvplan, read by serving processes and other tools): parse, validate, and
// write back as kvplan would.
#include "fuzz/fuzz_target.h"
#include "plan/plan.h"
#include "plan/plan_fingerprint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvplan;
  fuzz::refused_or_ok([&] {
    const Plan plan = plan_from_text(fuzz::as_text(data, size), "fuzz/plan.json");
    (void)plan_to_json(plan).dump(2);
    (void)plan_fingerprint(plan);
  });
  return 0;
}
