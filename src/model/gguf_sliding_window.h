// Which layers of a GGUF model attend over a sliding window. A GGUF header holds one window size
// (`<arch>.attention.sliding_window`) and, for most architectures, nothing that says which layers
// use it: the engines hard-code that per architecture, so kvplan applies llama.cpp's rule.
//
//   std::vector<int64_t> w = kvplan::gguf_sliding_windows(gguf, "gemma3", 18, max_window);
//   w[4];  // 512: sliding (keeps the last 512 tokens)
//   w[5];  // 0:   global (layers 5, 11 and 17 keep the whole context)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvplan {

class GgufFile;

// Per layer, the window in tokens (0 = full attention). Which layers slide, in this order:
//  1. `<arch>.attention.sliding_window_pattern` when the file has it: an array of n_layers flags
//     (nonzero = sliding), or a number n read as llama.cpp's period rule below;
//  2. the period llama.cpp's loader sets for the architecture (llama_hparams::set_swa_pattern:
//     layer il slides when il % n < n - 1, i.e. the last layer of each period is global):
//     gemma2 2, gemma3 6, cohere2 4, gpt-oss 2;
//  3. otherwise every layer (phi3 and the other single-window models).
// No window key means no sliding layers, except gemma2, whose loader defaults the window to 4096.
// Throws Error(kInvalidArgument) naming the file and key for a window above `max_window` or a
// malformed pattern.
std::vector<int64_t> gguf_sliding_windows(const GgufFile& gguf, const std::string& arch,
                                          int n_layers, int64_t max_window);

}  // namespace kvplan
