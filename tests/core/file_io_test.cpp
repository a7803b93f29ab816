#include "core/file_io.h"

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

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

// Threads of one process writing the same path must not share a temporary file: every version a
// reader sees, and the last one, is exactly one writer's whole text, and no temporary is left.
TEST(FileIo, ConcurrentAtomicWritesOfOnePathNeverMix) {
  const fs::path dir = fs::temp_directory_path() / "kvplan_file_io_concurrent_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path path = dir / "profile.json";
  constexpr int kWriters = 8;
  constexpr int kWritesEach = 12;
  // Writer t's text: its own letter, and its own length, so a mix of two writes cannot pass.
  std::vector<std::string> texts;
  for (int t = 0; t < kWriters; ++t) texts.emplace_back((64 << 10) + 997 * t, char('a' + t));
  auto is_one_whole_write = [&](const std::string& s) {
    for (const std::string& text : texts) {
      if (s == text) return true;
    }
    return false;
  };
  write_file_atomic(path, texts[0]);

  std::atomic<int> failures{0};
  std::atomic<int> writers_done{0};
  std::vector<std::string> errors(kWriters + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < kWritesEach; ++i) write_file_atomic(path, texts[t]);
      } catch (const std::exception& e) {
        errors[t] = e.what();
        ++failures;
      }
      ++writers_done;
    });
  }
  threads.emplace_back([&] {  // a reader that must only ever see whole versions
    try {
      while (writers_done.load() < kWriters) {
        if (!is_one_whole_write(read_text_file(path))) {
          errors[kWriters] = "a reader saw a mixed or partial file";
          ++failures;
          return;
        }
      }
    } catch (const std::exception& e) {
      errors[kWriters] = e.what();
      ++failures;
    }
  });
  for (std::thread& th : threads) th.join();
  for (const std::string& e : errors) EXPECT_TRUE(e.empty()) << e;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(is_one_whole_write(read_text_file(path)));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"profile.json"});
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
