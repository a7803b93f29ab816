// profile.json: round trip, deterministic bytes, and the one-line errors for malformed files.
#include "profile/profile_data.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_io.h"

namespace kvplan {
namespace {

Profile sample(int shard_index = 0, int shard_count = 1) {
  Profile p;
  p.tool_version = "0.1.0";
  p.model = {"m", "llama", "00112233aabbccdd", 4, KvGeometry::uniform("m", 2, 2, 16)};
  p.calibration = {"default.jsonl", "ffeeddccbbaa9988", 3, 120, 64, 1, 2, 40};
  p.candidates = {KvPair::parse("KV8"), KvPair::parse("q8_0/q4_0")};
  p.shard_index = shard_index;
  p.shard_count = shard_count;
  p.reset_cells();
  for (int l = 0; l < 2; ++l) {
    for (size_t c = 0; c < 2; ++c) {
      if (shard_of_cell(l, c, 2, shard_count) != shard_index) continue;
      ProfileCell cell;
      cell.pair = p.candidates[c];
      cell.key_bits = 8;
      cell.value_bits = c == 0 ? 8 : 4.5;
      cell.nominal_bits = (cell.key_bits + cell.value_bits) / 2;
      cell.key_bytes_per_token = 48;
      cell.value_bytes_per_token = 36;
      cell.metrics = {0.01 * (l + 1), 0.02 / 3.0, 0.1 + c, 1e-7, 3.25e-5 * (c + 1)};
      p.cells[l][c] = cell;
    }
  }
  p.timings.total_s = 1.5;
  return p;
}

TEST(ProfileData, RoundTripKeepsBytes) {
  const Profile p = sample();
  const std::string text = profile_text(p);
  const Profile back = profile_from_json(nlohmann::json::parse(text), "p.json");
  EXPECT_EQ(profile_text(back), text);
  EXPECT_TRUE(back.complete());
  EXPECT_EQ(back.cell(1, 0)->metrics.e_k, 0.02);
  EXPECT_EQ(back.cell(0, 0)->metrics.e_v, 0.02 / 3.0);  // shortest round-trip doubles
  // Key order is fixed and timings come last.
  EXPECT_LT(text.find("\"schema\""), text.find("\"model\""));
  EXPECT_LT(text.find("\"layers\""), text.find("\"timings\""));
  EXPECT_EQ(text.find("\"shard\""), std::string::npos);
  const Profile s = sample(1, 3);
  const std::string st = profile_text(s);
  EXPECT_NE(st.find("\"shard\""), std::string::npos);
  EXPECT_EQ(profile_text(profile_from_json(nlohmann::json::parse(st), "s.json")), st);
}

TEST(ProfileData, PerHeadOutputErrorsRoundTripAndAreOnePerKvHead) {
  Profile p = sample();
  p.cells[1][1]->metrics.o_mse_heads = {0.25, 0.75};
  p.cells[1][1]->metrics.dkl_heads = {1e-5, 3e-5};
  const std::string text = profile_text(p);
  const Profile back = profile_from_json(nlohmann::json::parse(text), "p.json");
  EXPECT_EQ(back.cell(1, 1)->metrics.o_mse_heads, (std::vector<double>{0.25, 0.75}));
  EXPECT_EQ(back.cell(1, 1)->metrics.dkl_heads, (std::vector<double>{1e-5, 3e-5}));
  EXPECT_TRUE(back.cell(0, 0)->metrics.o_mse_heads.empty());
  EXPECT_EQ(profile_text(back), text);
  nlohmann::json j = nlohmann::json::parse(text);
  j["layers"][1]["pairs"][1]["o_mse_heads"] = {0.25};
  try {
    (void)profile_from_json(j, "p.json");
    ADD_FAILURE() << "one value for two KV heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("o_mse_heads"), std::string::npos) << e.what();
  }
  j = nlohmann::json::parse(text);
  j["layers"][1]["pairs"][1]["dkl_heads"] = {1e-5, 2e-5, 3e-5};
  EXPECT_THROW((void)profile_from_json(j, "p.json"), Error);
}

void expect_error(nlohmann::json j, const std::string& fragment) {
  try {
    (void)profile_from_json(j, "p.json");
    ADD_FAILURE() << "accepted; wanted an error with " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(ProfileData, MalformedFilesNameTheField) {
  const nlohmann::json good = nlohmann::json::parse(profile_text(sample()));
  nlohmann::json j = good;
  j["schema"] = "kvplan.plan/v1";
  expect_error(j, "p.json: field 'schema'");
  j = good;
  j["model"].erase("fingerprint");
  expect_error(j, "field 'model.fingerprint' is missing");
  j = good;
  j["layers"][0]["pairs"][1]["dkl"] = -1;
  expect_error(j, "layers[0].pairs[1].dkl");
  j = good;
  j["layers"][1]["pairs"][0]["pair"] = "KV4";
  expect_error(j, "not one of the candidates");
  j = good;
  j["layers"][1]["pairs"][1] = j["layers"][1]["pairs"][0];
  expect_error(j, "appears twice");
  j = good;
  j["candidates"][1] = "q9_9/int4";
  expect_error(j, "candidates[1]");
  j = good;
  j["shard"] = {{"index", 1}, {"count", 2}};  // its cells belong to shard 0 of 1
  expect_error(j, "does not belong to shard 1/2");
  j = good;
  j["model"]["num_kv_heads"] = {2};
  expect_error(j, "model.num_kv_heads");
}

TEST(ProfileData, IdentityMismatchNamesTheField) {
  const Profile a = sample();
  Profile b = sample();
  EXPECT_EQ(profile_identity_mismatch(a, b), "");
  b.calibration.hash = "0000000000000000";
  EXPECT_EQ(profile_identity_mismatch(a, b).rfind("calibration.hash", 0), 0u);
  b = sample();
  b.candidates[1] = KvPair::parse("KV4");
  EXPECT_EQ(profile_identity_mismatch(a, b).rfind("candidates", 0), 0u);
  b = sample();
  b.attention_device = "gpu";
  EXPECT_EQ(profile_identity_mismatch(a, b), "attention_device: cpu vs gpu");
}

TEST(ProfileData, AttentionDeviceIsReadFromTheFieldOrAnOlderFilesTimings) {
  nlohmann::json j = nlohmann::json::parse(profile_text(sample()));
  EXPECT_FALSE(j.contains("attention_device"));  // absent = cpu
  Profile gpu = sample();
  gpu.attention_device = "gpu";
  EXPECT_EQ(nlohmann::json::parse(profile_text(gpu))["attention_device"], "gpu");
  j["attention_device"] = "gpu";
  EXPECT_EQ(profile_from_text(j.dump(), "p.json").attention_device, "gpu");
  j.erase("attention_device");
  j["timings"] = {{"attention_device", "gpu"}};
  EXPECT_EQ(profile_from_text(j.dump(), "p.json").attention_device, "gpu");
  j["attention_device"] = "tpu";
  try {
    (void)profile_from_text(j.dump(), "p.json");
    ADD_FAILURE() << "accepted attention_device \"tpu\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention_device"), std::string::npos) << e.what();
  }
}

TEST(ProfileData, FilesAreWrittenAtomicallyAndReadBack) {
  const auto path = std::filesystem::temp_directory_path() / "kvplan_profile_data_test.json";
  write_profile(path, sample());
  EXPECT_EQ(read_text_file(path), profile_text(sample()));
  EXPECT_EQ(profile_text(read_profile(path)), profile_text(sample()));
  write_file_atomic(path, "{\"schema\": ");
  EXPECT_THROW(read_profile(path), Error);
  std::filesystem::remove(path);
}

// Review finding: counts were cast to int unchecked, so num_layers 2^32 + 1 read as 1 layer.
TEST(ProfileData, CountsAreBounded) {
  const nlohmann::json good = nlohmann::json::parse(profile_text(sample()));
  nlohmann::json j = good;
  j["model"]["num_layers"] = (int64_t{1} << 32) + 1;
  expect_error(j, "field 'model.num_layers': expected an integer in 1..100000");
  j = good;
  j["calibration"]["prompts"] = int64_t{1} << 40;
  expect_error(j, "field 'calibration.prompts': expected an integer in 1..2147483647");
  j = good;
  j["model"]["num_kv_heads"][0] = uint64_t{1} << 63;
  expect_error(j, "model.num_kv_heads");
}

TEST(ProfileData, SlidingWindowsAreRecordedOnlyWhereALayerSlides) {
  Profile p = sample();
  const std::string global = profile_text(p);
  EXPECT_EQ(global.find("sliding_window"), std::string::npos);
  p.model.geometry.layers[0].sliding_window = 512;
  const Profile back = profile_from_text(profile_text(p), "p.json");
  EXPECT_EQ(back.model.geometry.layers[0].sliding_window, 512);
  EXPECT_EQ(back.model.geometry.layers[1].sliding_window, 0);
  EXPECT_EQ(profile_text(back), profile_text(p));
  // A profile written before windows were recorded loads with none.
  EXPECT_EQ(profile_from_text(global, "old.json").model.geometry.layers[0].sliding_window, 0);
}

}  // namespace
}  // namespace kvplan
