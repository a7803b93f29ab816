#include "plan/layer_ranges.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvplan {

std::string layer_ranges(std::vector<int> layers) {
  std::sort(layers.begin(), layers.end());
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") +
           (j == i ? std::to_string(layers[i]) : fmt::format("{}-{}", layers[i], layers[j]));
    i = j + 1;
  }
  return out;
}

}  // namespace kvplan
