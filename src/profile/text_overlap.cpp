#include "profile/text_overlap.h"

#include <algorithm>
#include <optional>
#include <span>
#include <unordered_map>

#include "core/error.h"
#include "core/hash.h"

namespace kvplan {
namespace {

using Tokens = std::vector<int32_t>;

// Tokens [offset, offset + length) of one sample.
struct Window {
  size_t sample = 0;
  size_t offset = 0;
  size_t length = 0;
};

// The windows of one set of samples, keyed by the hash of their token ids. Only the first window
// with a given content is kept: samples are inserted in index order, so a lookup returns the
// lowest sample holding that content. Several windows share a key only on a hash collision, and
// contents are always compared exactly.
class WindowIndex {
 public:
  explicit WindowIndex(const std::vector<Tokens>& samples) : samples_(samples) {}

  void insert(const Window& window) {
    const std::span<const int32_t> tokens = view(window);
    const uint64_t hash = hash_tokens(tokens);
    if (find(hash, tokens) == nullptr) windows_.emplace(hash, window);
  }

  [[nodiscard]] const Window* find(std::span<const int32_t> tokens) const {
    return find(hash_tokens(tokens), tokens);
  }

 private:
  [[nodiscard]] std::span<const int32_t> view(const Window& w) const {
    return std::span<const int32_t>(samples_[w.sample]).subspan(w.offset, w.length);
  }
  [[nodiscard]] const Window* find(uint64_t hash, std::span<const int32_t> tokens) const {
    const auto [first, last] = windows_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      if (std::ranges::equal(view(it->second), tokens)) return &it->second;
    }
    return nullptr;
  }
  static uint64_t hash_tokens(std::span<const int32_t> tokens) {
    return hash64(std::as_bytes(tokens));
  }

  const std::vector<Tokens>& samples_;
  std::unordered_multimap<uint64_t, Window> windows_;
};

}  // namespace

TextOverlap find_text_overlap(const std::vector<std::vector<int32_t>>& a,
                              const std::vector<std::vector<int32_t>>& b,
                              const TextOverlapOptions& options) {
  const size_t n = options.ngram_tokens;
  if (n == 0) fail(ErrorCode::kInvalidArgument, "text overlap: ngram_tokens must be > 0, got 0");

  WindowIndex whole(b), runs(b);
  for (size_t j = 0; j < b.size(); ++j) {
    if (b[j].empty()) continue;  // an empty prompt shares no text with anything
    whole.insert({j, 0, b[j].size()});
    for (size_t offset = 0; offset + n <= b[j].size(); ++offset) runs.insert({j, offset, n});
  }

  for (size_t i = 0; i < a.size(); ++i) {
    const std::span<const int32_t> sample(a[i]);
    if (sample.empty()) continue;
    std::optional<Window> best;
    size_t offset_a = 0;
    bool identical = false;
    if (const Window* w = whole.find(sample)) {
      best = *w;
      identical = true;
    }
    for (size_t offset = 0; offset + n <= sample.size(); ++offset) {
      const Window* w = runs.find(sample.subspan(offset, n));
      // Strictly lower: for the same sample of B, "identical" is the more telling reason.
      if (w != nullptr && (!best || w->sample < best->sample)) {
        best = *w;
        offset_a = offset;
        identical = false;
      }
    }
    if (!best) continue;
    const std::string reason =
        identical
            ? fmt::format("sample {} is identical to sample {} ({} tokens)", i, best->sample,
                          sample.size())
            : fmt::format("sample {} and sample {} share a run of {} tokens (from token {} and {})",
                          i, best->sample, n, offset_a, best->offset);
    return {.overlaps = true, .sample_a = i, .sample_b = best->sample, .reason = reason};
  }
  return {};
}

}  // namespace kvplan
