#include "core/mapped_file.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

TEST(MappedFile, MapsBytesAndMoves) {
  const auto path = std::filesystem::temp_directory_path() / "kvplan_mapped_file_test.bin";
  std::ofstream(path, std::ios::binary) << "GGUF\x03";
  MappedFile f(path);
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(static_cast<char>(f.bytes()[0]), 'G');
  MappedFile moved = std::move(f);
  EXPECT_EQ(moved.size(), 5u);
  EXPECT_EQ(f.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from state is defined
  std::filesystem::remove(path);
}

TEST(MappedFile, MissingFileIsNotFound) {
  try {
    MappedFile f("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
  EXPECT_THROW(MappedFile{std::filesystem::temp_directory_path()}, Error);
}

TEST(MappedFile, EmptyFileMapsToNothing) {
  const auto path = std::filesystem::temp_directory_path() / "kvplan_empty.bin";
  std::ofstream(path, std::ios::binary).flush();
  MappedFile f(path);
  EXPECT_EQ(f.size(), 0u);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kvplan
