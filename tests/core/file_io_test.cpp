#include "core/file_io.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

namespace fs = std::filesystem;

TEST(FileIo, AtomicWriteReplacesWholeFileAndLeavesNoTemporary) {
  const fs::path dir = fs::temp_directory_path() / "kvplan_file_io_test";
  fs::create_directories(dir);
  const fs::path path = dir / "plan.json";
  write_file_atomic(path, "first version, longer");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_text_file(path), "second");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
  fs::remove_all(dir);
}

TEST(FileIo, ErrorsNameThePath) {
  try {
    (void)read_text_file("/nonexistent/kvplan/x.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kvplan/x.json"), std::string::npos);
  }
  EXPECT_THROW(write_file_atomic("/nonexistent/kvplan/x.json", "x"), Error);
  EXPECT_THROW((void)read_text_file(fs::temp_directory_path()), Error);
}

}  // namespace
}  // namespace kvplan
