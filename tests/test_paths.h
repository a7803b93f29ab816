// Where tests find real models and data: $KVPLAN_TEST_MODELS / $KVPLAN_TEST_DATA, else the
// ../shared folders beside the checkout. A test that needs such a file starts with
// KVPLAN_NEED_FILE(path, hint): absent, it skips with the reason — or fails when
// KVPLAN_REQUIRE_MODELS=1 (CI sets it, so that a run cannot pass by skipping the model tests).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace kvplan::test {

inline std::filesystem::path models_dir() {
  if (const char* env = std::getenv("KVPLAN_TEST_MODELS"); env != nullptr && *env) return env;
  return KVPLAN_TEST_MODELS_DEFAULT;
}

inline std::filesystem::path data_dir() {
  if (const char* env = std::getenv("KVPLAN_TEST_DATA"); env != nullptr && *env) return env;
  return KVPLAN_TEST_DATA_DEFAULT;
}

// SmolLM2-135M-Instruct.Q4_1.gguf as fetched by scripts/models/fetch-smollm2.sh into the cache
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

// gemma-3-270m-q4_k_m.gguf as fetched by scripts/models/fetch-gemma3.sh into the same cache.
inline std::filesystem::path gemma3_path() {
  return smollm2_path().parent_path() / "gemma-3-270m-q4_k_m.gguf";
}

// $KVPLAN_REQUIRE_MODELS=1: a missing model or data file fails the test that needs it.
inline bool models_required() {
  const char* env = std::getenv("KVPLAN_REQUIRE_MODELS");
  return env != nullptr && std::string_view(env) == "1";
}

}  // namespace kvplan::test

// In a TEST body or a fixture's SetUp: returns from it, skipped (failed under
// KVPLAN_REQUIRE_MODELS=1), when `needed_path` does not exist; `hint` says how to get the file.
//   KVPLAN_NEED_FILE(kvplan::test::smollm2_path(), "run scripts/models/fetch-smollm2.sh");
// A macro because GTEST_SKIP and GTEST_FAIL return from the function that uses them.
#define KVPLAN_NEED_FILE(needed_path, hint)                                                    \
  if (const std::filesystem::path kvplan_needed_file_ = (needed_path);                         \
      std::filesystem::exists(kvplan_needed_file_)) {                                          \
  } else if (::kvplan::test::models_required())                                                \
    GTEST_FAIL() << kvplan_needed_file_.string() << " absent (" << (hint)                      \
                 << "); KVPLAN_REQUIRE_MODELS=1 makes a missing model or data file a failure"; \
  else                                                                                         \
    GTEST_SKIP() << kvplan_needed_file_.string() << " absent: " << (hint)
