// Layer indices as people read them: "0-4, 6-10, 12" (sorted, runs of consecutive layers joined).
#pragma once

#include <string>
#include <vector>

namespace kvplan {

std::string layer_ranges(std::vector<int> layers);

}  // namespace kvplan
