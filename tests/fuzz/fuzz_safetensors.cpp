// Hugging Face .safetensors files (downloaded from the internet): header length, JSON header,
// dtypes, shapes and data offsets.
#include "fuzz/fuzz_target.h"
#include "model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvplan;
  fuzz::refused_or_ok([&] {
    const SafetensorsFile file(fuzz::as_bytes(data, size), "fuzz.safetensors");
    // Every tensor's bytes must lie inside the file and match its shape: touch both ends.
    unsigned sum = 0;
    for (const SafetensorsTensor& t : file.tensors()) {
      if (!t.bytes.empty()) {
        sum += static_cast<unsigned>(t.bytes.front()) + static_cast<unsigned>(t.bytes.back());
      }
      (void)t.n_elements();
    }
    (void)sum;
  });
  return 0;
}
