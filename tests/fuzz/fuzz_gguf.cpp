// GGUF model files (downloaded from the internet): the reader, then what kvplan derives from the
// header alone — the model config and the tokenizer — as `kvplan estimate` and the loaders do.
#include "fuzz/fuzz_target.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/tensor_dequant.h"
#include "model/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvplan;
  const std::span<const std::byte> bytes = fuzz::as_bytes(data, size);
  fuzz::refused_or_ok([&] {
    const GgufFile header(bytes, "fuzz.gguf", GgufReadOptions{.metadata_only = true});
    fuzz::refused_or_ok([&] { (void)kv_geometry(gguf_model_config(header)); });
    fuzz::refused_or_ok([&] {
      const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(header);
      (void)tok->decode(tok->encode("Once upon a time, 42 cats.", {.parse_special = true}));
    });
  });
  fuzz::refused_or_ok([&] {
    const GgufFile gguf(bytes, "fuzz.gguf");
    // Every tensor's bytes must lie inside the file: touch the first and last of each, and
    // dequantize the small ones as the weight loader does (the output is sized by n_elements, so
    // only tensors a fuzz input can plausibly hold).
    unsigned sum = 0;
    for (const GgufTensorInfo& t : gguf.tensors()) {
      const std::span<const std::byte> raw = gguf.tensor_bytes(t);
      if (!raw.empty())
        sum += static_cast<unsigned>(raw.front()) + static_cast<unsigned>(raw.back());
      if (t.n_elements <= (1u << 16)) {
        fuzz::refused_or_ok([&] { (void)dequantize_gguf_tensor(gguf, t); });
      }
    }
    (void)sum;
  });
  return 0;
}
