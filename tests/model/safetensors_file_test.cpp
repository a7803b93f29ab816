#include "model/safetensors_file.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "model_file_writers.h"

namespace kvplan {
namespace {

using test::SafetensorsEntry;

void expect_error(const std::filesystem::path& path, const std::vector<std::string>& needles) {
  try {
    SafetensorsSet set(path);
    FAIL() << path << " was accepted";
  } catch (const Error& e) {
    for (const std::string& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "'" << n << "' not in: " << e.what();
    }
  }
}

TEST(Safetensors, ReadsF32F16Bf16) {
  const auto dir = test::temp_dir("st_ok");
  // F32 via the writer, then F16/BF16 entries by hand.
  nlohmann::json header = {
      {"a", {{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {0, 16}}}},
      {"b", {{"dtype", "F16"}, {"shape", {2}}, {"data_offsets", {16, 20}}}},
      {"c", {{"dtype", "BF16"}, {"shape", {1, 2}}, {"data_offsets", {20, 24}}}}};
  std::string text = header.dump();
  const uint64_t n = text.size();
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  bytes += text;
  const float a[4] = {1.0f, -2.0f, 3.5f, 0.25f};
  bytes.append(reinterpret_cast<const char*>(a), 16);
  const uint16_t b[2] = {0x3c00, 0xc000};  // f16 1.0, -2.0
  bytes.append(reinterpret_cast<const char*>(b), 4);
  const uint16_t c[2] = {0x3f80, 0x4040};  // bf16 1.0, 3.0
  bytes.append(reinterpret_cast<const char*>(c), 4);
  test::write_bytes(dir / "model.safetensors", bytes);
  const SafetensorsSet set(dir);
  EXPECT_EQ(set.to_f32(set.tensor("a")), std::vector<float>({1.0f, -2.0f, 3.5f, 0.25f}));
  EXPECT_EQ(set.to_f32(set.tensor("b")), std::vector<float>({1.0f, -2.0f}));
  EXPECT_EQ(set.to_f32(set.tensor("c")), std::vector<float>({1.0f, 3.0f}));
  EXPECT_EQ(set.tensor("c").shape, std::vector<uint64_t>({1, 2}));
  EXPECT_THROW((void)set.tensor("missing"), Error);
}

TEST(Safetensors, ShardedIndex) {
  const auto dir = test::temp_dir("st_sharded");
  test::write_bytes(dir / "model-00001-of-00002.safetensors",
                    test::safetensors_bytes({{"x", {2}, {1.0f, 2.0f}}}));
  test::write_bytes(dir / "model-00002-of-00002.safetensors",
                    test::safetensors_bytes({{"y", {1}, {3.0f}}}));
  test::write_bytes(dir / "model.safetensors.index.json",
                    R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors",
                        "y": "model-00002-of-00002.safetensors"}})");
  const SafetensorsSet set(dir);
  EXPECT_EQ(set.to_f32(set.tensor("x")), std::vector<float>({1.0f, 2.0f}));
  EXPECT_EQ(set.to_f32(set.tensor("y")), std::vector<float>({3.0f}));
  EXPECT_EQ(set.tensors().size(), 2u);
}

TEST(Safetensors, RefusesCorruptFiles) {
  const auto dir = test::temp_dir("st_bad");
  const std::string good = test::safetensors_bytes({{"w", {2, 2}, {1, 2, 3, 4}}});

  std::string past_end = good;
  const uint64_t huge = good.size();
  std::memcpy(past_end.data(), &huge, 8);
  test::write_bytes(dir / "len.safetensors", past_end);
  expect_error(dir / "len.safetensors", {"len.safetensors", "header length"});

  test::write_bytes(dir / "short.safetensors", std::string("abc"));
  expect_error(dir / "short.safetensors", {"short.safetensors", "too short"});

  std::string not_json = good;
  not_json[8] = '#';
  test::write_bytes(dir / "json.safetensors", not_json);
  expect_error(dir / "json.safetensors", {"json.safetensors", "JSON"});

  auto with_header = [&](const nlohmann::json& h, size_t data_bytes) {
    std::string text = h.dump();
    const uint64_t n = text.size();
    return std::string(reinterpret_cast<const char*>(&n), 8) + text + std::string(data_bytes, '\0');
  };
  test::write_bytes(
      dir / "range.safetensors",
      with_header({{"w", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}}, 8));
  expect_error(dir / "range.safetensors", {"range.safetensors", "'w'", "outside"});

  test::write_bytes(
      dir / "shape.safetensors",
      with_header({{"w", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 16}}}}}, 16));
  expect_error(dir / "shape.safetensors", {"shape.safetensors", "'w'", "does not match"});

  test::write_bytes(
      dir / "dtype.safetensors",
      with_header({{"w", {{"dtype", "I64"}, {"shape", {2}}, {"data_offsets", {0, 16}}}}}, 16));
  expect_error(dir / "dtype.safetensors", {"dtype.safetensors", "'w'", "I64"});
}

// Review finding: overlapping data_offsets were accepted (the format forbids shared bytes).
TEST(Safetensors, RefusesOverlappingTensors) {
  const auto dir = test::temp_dir("st_overlap");
  const nlohmann::json h = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                            {"b", {{"dtype", "F16"}, {"shape", {4}}, {"data_offsets", {8, 16}}}}};
  const std::string text = h.dump();
  const uint64_t n = text.size();
  test::write_bytes(dir / "overlap.safetensors", std::string(reinterpret_cast<const char*>(&n), 8) +
                                                     text + std::string(16, '\0'));
  expect_error(dir / "overlap.safetensors", {"overlap.safetensors", "'a' and 'b' overlap"});
}

// The in-memory reader is the file reader; a header nested past the JSON depth limit is refused.
TEST(Safetensors, FromBytesAndDeepHeaders) {
  const std::string good = test::safetensors_bytes({{"w", {2, 2}, {1, 2, 3, 4}}});
  const SafetensorsFile file(std::as_bytes(std::span(good.data(), good.size())), "mem.safetensors");
  ASSERT_EQ(file.tensors().size(), 1u);
  EXPECT_EQ(file.tensors()[0].bytes.size(), 16u);
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const uint64_t n = deep.size();
  const std::string bytes = std::string(reinterpret_cast<const char*>(&n), 8) + deep;
  try {
    (void)SafetensorsFile(std::as_bytes(std::span(bytes.data(), bytes.size())), "deep.safetensors");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deep.safetensors: header: not valid JSON: nested deeper"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvplan
