#include "model/gguf_sliding_window.h"

#include <cmath>
#include <optional>

#include "core/error.h"
#include "model/gguf_file.h"

namespace kvplan {
namespace {

// llama.cpp's llama_hparams::set_swa_pattern(n): layer il slides when il % n < n - 1; 0 = every
// layer slides.
bool slides_in_period(int layer, int64_t period) {
  return period == 0 || layer % period < period - 1;
}

// The periods llama.cpp's loader (src/llama-model.cpp) sets for architectures whose GGUF carries
// only the window size.
std::optional<int64_t> architecture_period(const std::string& arch) {
  if (arch == "gemma2" || arch == "gpt-oss") return 2;
  if (arch == "gemma3") return 6;
  if (arch == "cohere2") return 4;
  return std::nullopt;
}

constexpr int64_t kGemma2DefaultWindow = 4096;  // llama.cpp's gemma2 loader, key absent
constexpr uint64_t kMaxPeriod = 1 << 20;        // far above any layer count; keeps the cast exact

}  // namespace

std::vector<int64_t> gguf_sliding_windows(const GgufFile& gguf, const std::string& arch,
                                          int n_layers, int64_t max_window) {
  std::vector<int64_t> windows(static_cast<size_t>(n_layers), 0);
  const std::string window_key = arch + ".attention.sliding_window";
  int64_t window = 0;
  if (gguf.has(window_key)) {
    const uint64_t w = gguf.get_uint(window_key);
    if (w > static_cast<uint64_t>(max_window)) {
      fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' = {}: expected at most {}",
           gguf.path().string(), window_key, w, max_window);
    }
    window = static_cast<int64_t>(w);
  } else if (arch == "gemma2") {
    window = kGemma2DefaultWindow;
  }
  if (window == 0) return windows;

  const std::string pattern_key = arch + ".attention.sliding_window_pattern";
  if (const GgufValue* p = gguf.find(pattern_key); p != nullptr && p->is_array()) {
    if (p->numbers.size() != windows.size()) {
      fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' lists {} layers, expected {}",
           gguf.path().string(), pattern_key, p->numbers.size(), n_layers);
    }
    for (size_t l = 0; l < windows.size(); ++l) {
      const double flag = p->numbers[l];
      if (!(flag >= 0) || flag != std::floor(flag)) {
        fail(ErrorCode::kInvalidArgument,
             "{}: metadata '{}' entry {} = {}: expected a flag (0 = global, nonzero = sliding)",
             gguf.path().string(), pattern_key, l, flag);
      }
      if (flag != 0) windows[l] = window;
    }
    return windows;
  }
  std::optional<int64_t> period = architecture_period(arch);
  if (gguf.has(pattern_key)) {
    const uint64_t n = gguf.get_uint(pattern_key);
    if (n > kMaxPeriod) {
      fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' = {}: expected a period in 0..{}",
           gguf.path().string(), pattern_key, n, kMaxPeriod);
    }
    period = static_cast<int64_t>(n);
  }
  for (int l = 0; l < n_layers; ++l) {
    if (!period || slides_in_period(l, *period)) windows[static_cast<size_t>(l)] = window;
  }
  return windows;
}

}  // namespace kvplan
