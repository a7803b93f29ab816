// Hugging Face tokenizer.json (downloaded with a model), and tokenizer_config.json beside it: the
// input up to its first NUL byte is tokenizer.json, the rest tokenizer_config.json (JSON text holds
// no NUL, so the split never cuts a valid file). A tokenizer that loads also encodes and decodes.
#include "fuzz/fuzz_target.h"
#include "model/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvplan;
  const std::string_view input = fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  const std::string_view tokenizer = input.substr(0, nul);
  const std::string_view config =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  fuzz::refused_or_ok([&] {
    const std::unique_ptr<Tokenizer> tok =
        Tokenizer::from_hf_json_text(tokenizer, config, "fuzz/tokenizer.json");
    (void)tok->decode(tok->encode("Hello world, 1234 caf\xc3\xa9!", {.parse_special = true}));
    fuzz::refused_or_ok([&] {
      (void)tok->apply_chat_template({{"user", "Hi"}}, /*add_generation_prompt=*/true);
    });
  });
  return 0;
}
