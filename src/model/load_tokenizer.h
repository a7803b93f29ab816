// The tokenizer that belongs to a model path: a GGUF's embedded vocabulary, or tokenizer.json in an
// HF model directory. Header-only because the tokenizer library links against kvplan_model, not the
// other way round: callers link kvplan_tokenizer.
//
//   std::unique_ptr<kvplan::Tokenizer> tok = kvplan::load_model_tokenizer("stories260K.gguf");
#pragma once

#include <filesystem>
#include <memory>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/tokenizer/tokenizer.h"

namespace kvplan {

inline std::unique_ptr<Tokenizer> load_model_tokenizer(const std::filesystem::path& model_path) {
  std::error_code ec;
  if (std::filesystem::is_directory(model_path, ec) || model_path.extension() != ".gguf") {
    const std::filesystem::path dir =
        std::filesystem::is_directory(model_path, ec) ? model_path : model_path.parent_path();
    const std::filesystem::path json = dir / "tokenizer.json";
    if (!std::filesystem::exists(json, ec)) {
      fail(ErrorCode::kNotFound, "{}: no tokenizer.json beside the model", dir.string());
    }
    return Tokenizer::from_hf_json(json);
  }
  const GgufFile gguf(model_path, GgufReadOptions{.metadata_only = true});
  return Tokenizer::from_gguf(gguf);
}

}  // namespace kvplan
