// Where tests find real models and data: $KVPLAN_TEST_MODELS / $KVPLAN_TEST_DATA, else the
// ../shared folders beside the checkout. Tests that need a file call GTEST_SKIP with the reason
// only when it is absent.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kvplan::test {

inline std::filesystem::path models_dir() {
  if (const char* env = std::getenv("KVPLAN_TEST_MODELS"); env != nullptr && *env) return env;
  return KVPLAN_TEST_MODELS_DEFAULT;
}

inline std::filesystem::path data_dir() {
  if (const char* env = std::getenv("KVPLAN_TEST_DATA"); env != nullptr && *env) return env;
  return KVPLAN_TEST_DATA_DEFAULT;
}

// SmolLM2-135M-Instruct.Q4_1.gguf as fetched by scripts/fetch-smollm2.sh into the cache
// ($KVPLAN_CACHE, default ~/.cache/kvplan).
inline std::filesystem::path smollm2_path() {
  std::filesystem::path cache;
  if (const char* env = std::getenv("KVPLAN_CACHE"); env != nullptr && *env) {
    cache = env;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    cache = std::filesystem::path(home) / ".cache" / "kvplan";
  }
  return cache / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace kvplan::test
