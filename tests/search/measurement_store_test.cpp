// MeasurementStore: cells read back with the bits they were written with, a last line cut short by
// a killed run dropped, anything else malformed refused naming file and line.
#include "search/measurement_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <unistd.h>

#include "core/error.h"

namespace kvplan::search {
namespace {

namespace fs = std::filesystem;

class MeasurementStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvplan_measurements_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = dir_ / "cells.jsonl";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string text() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void write(const std::string& text) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << text;
  }
  // The message of the Error opening the store throws, or "" when it opens.
  std::string open_error() const {
    try {
      const MeasurementStore store(path_, "ctx");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      return e.what();
    }
    return "";
  }
  fs::path dir_, path_;
};

TEST_F(MeasurementStoreTest, CellsComeBackWithTheirBits) {
  // Values whose shortest decimal form needs all 17 digits, a subnormal, a huge sum.
  const std::vector<MeasurementStore::Cell> cells = {
      {0.1 + 0.2, 1.0 / 3.0, 7},
      {std::nextafter(1.0, 2.0), 812.5, 0},
      {std::numeric_limits<double>::denorm_min(), 1e300, std::numeric_limits<int64_t>::max()},
      {0.0, 123456.789012345678, 1011}};
  {
    MeasurementStore store(path_, "ctx");
    EXPECT_EQ(store.size(), 0u);
    for (size_t i = 0; i < cells.size(); ++i) store.add(0x9f00000000000000ull + i, cells[i]);
    // A key added again keeps its first cell and writes nothing.
    store.add(0x9f00000000000000ull, {5, 5, 5});
    // Non-finite sums are not kept.
    store.add(42, {std::numeric_limits<double>::infinity(), 0, 0});
    store.add(43, {0, std::numeric_limits<double>::quiet_NaN(), 0});
    EXPECT_EQ(store.size(), cells.size());
    EXPECT_FALSE(store.find(42));
  }
  const MeasurementStore again(path_, "ctx");
  ASSERT_EQ(again.size(), cells.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    const std::optional<MeasurementStore::Cell> c = again.find(0x9f00000000000000ull + i);
    ASSERT_TRUE(c) << i;
    EXPECT_EQ(c->kl, cells[i].kl) << i;  // bit-equal doubles
    EXPECT_EQ(c->nll, cells[i].nll) << i;
    EXPECT_EQ(c->agree, cells[i].agree) << i;
  }
  EXPECT_FALSE(again.find(1));
  // Header plus one line per cell, nothing else.
  const std::string t = text();
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), static_cast<long>(cells.size() + 1)) << t;
  EXPECT_TRUE(t.starts_with("{\"kvplan_measurements\": 1}\n")) << t;
}

TEST_F(MeasurementStoreTest, ALastLineCutShortIsDroppedAndTheFileMendedForAppending) {
  write(
      "{\"kvplan_measurements\": 1}\n"
      "{\"key\": \"00000000000000aa\", \"kl\": 0.5, \"nll\": 2, \"agree\": 3}\n"
      "{\"key\": \"00000000000000bb\", \"kl\": 0.");
  {
    MeasurementStore store(path_, "ctx");
    EXPECT_EQ(store.size(), 1u);
    EXPECT_EQ(store.find(0xaa), (MeasurementStore::Cell{0.5, 2, 3}));
    EXPECT_FALSE(store.find(0xbb));
    store.add(0xbb, {0.25, 1, 1});
  }
  const MeasurementStore again(path_, "ctx");
  EXPECT_EQ(again.size(), 2u);
  EXPECT_EQ(again.find(0xbb), (MeasurementStore::Cell{0.25, 1, 1}));
}

TEST_F(MeasurementStoreTest, MalformedLinesAreRefusedNamingFileAndLine) {
  const std::string header = "{\"kvplan_measurements\": 1}\n";
  const std::string where = path_.string() + ":2";
  write(header + "{\"key\": \"12\", \"kl\": 0.5, \"nll\": 2, \"agree\": 3}\n");
  EXPECT_NE(open_error().find(where + ": field 'key': expected 16 hex digits, got '12'"),
            std::string::npos);
  write(header + "{\"key\": \"00000000000000zz\", \"kl\": 0.5, \"nll\": 2, \"agree\": 3}\n");
  EXPECT_NE(open_error().find("16 hex digits"), std::string::npos);
  write(header + "{\"key\": \"00000000000000aa\", \"nll\": 2, \"agree\": 3}\n");
  EXPECT_NE(open_error().find(where + ": field 'kl' is missing"), std::string::npos);
  write(header + "{\"key\": \"00000000000000aa\", \"kl\": 0.5, \"nll\": 2, \"agree\": -1}\n");
  EXPECT_NE(open_error().find(where + ": field 'agree'"), std::string::npos);
  write(header + "not json\n");
  EXPECT_NE(open_error().find(where), std::string::npos);
  write("{\"kvplan_measurements\": 2}\n");
  EXPECT_NE(open_error().find(path_.string() + ":1: field 'kvplan_measurements': format version 2"),
            std::string::npos);
  write("{\"key\": \"00000000000000aa\", \"kl\": 0.5, \"nll\": 2, \"agree\": 3}\n");
  EXPECT_NE(open_error().find(":1: field 'kvplan_measurements' is missing"), std::string::npos);
  // An empty file (created, never written) opens and gets its header.
  write("");
  EXPECT_EQ(open_error(), "");
  EXPECT_EQ(text(), header);
}

TEST_F(MeasurementStoreTest, AFileInAMissingDirectoryIsNotFound) {
  try {
    const MeasurementStore store(dir_ / "absent" / "cells.jsonl", "ctx");
    FAIL() << "opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("absent/cells.jsonl"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvplan::search
