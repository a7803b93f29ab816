// Llama-family tensor naming and assembly into ModelWeights, shared by the GGUF and safetensors
// loaders (internal to src/model).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/model_weights.h"

namespace kvplan {

// Where the tensors come from: shapes outermost-first; vectors read as f32, matrices kept as
// stored ([rows, cols] already checked against the shape).
struct TensorSource {
  std::string file;  // for error messages
  std::function<bool(const std::string&)> has;
  std::function<std::vector<uint64_t>(const std::string&)> shape;
  std::function<std::vector<float>(const std::string&)> read;
  std::function<WeightMatrix(const std::string&, int64_t rows, int64_t cols)> matrix;
};

enum class TensorNaming { kGguf, kHf };

// A tensor dimension that sizes a config field (vocabulary, FFN width) as an int; Error
// (kInvalidArgument) naming the file and tensor when it does not fit in one (a safetensors
// shape may pair a zero with any other dimension and still hold no bytes).
int dimension_as_int(uint64_t dim, const std::string& file, const std::string& tensor);

// Fills token_embd, output_norm, output (unless tied) and layers of `w` (w.config set), checking
// every shape against the config.
void load_llama_family(const TensorSource& source, TensorNaming naming, ModelWeights& w);

}  // namespace kvplan
