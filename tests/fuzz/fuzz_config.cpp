// Hugging Face config.json (downloaded with a model): the architecture facts and the KV geometry
// kvplan derives from them.
#include "fuzz/fuzz_target.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvplan;
  fuzz::refused_or_ok([&] {
    const ModelConfig c = hf_config_from_text(fuzz::as_text(data, size), "fuzz/config.json");
    (void)kv_geometry(c);
  });
  return 0;
}
