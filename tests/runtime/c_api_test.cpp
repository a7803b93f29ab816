#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gpu_runtime.h"
#include "kvplan/kvplan_runtime.h"
#include "runtime_test_util.h"

namespace kvplan {
namespace {

namespace fs = std::filesystem;

bool gpu_present() {
  int n = 0;
  return gpu::compiled_in() && gpu::device_count(&n).ok() && n > 0;
}

class CApiTest : public ::testing::Test {
 protected:
  fs::path plan_path =
      fs::temp_directory_path() / ("kvplan_capi_plan_" + std::to_string(::getpid()) + ".json");
  void SetUp() override { write_plan(plan_path, test::mixed_plan()); }
  void TearDown() override { fs::remove(plan_path); }

  // Options with capacities small enough to pin anywhere and no model identity.
  static kvplan_options* small_options() {
    kvplan_options* opt = nullptr;
    EXPECT_EQ(kvplan_options_create(&opt), KVPLAN_OK);
    EXPECT_EQ(kvplan_options_set_chunk_tokens(opt, 32), KVPLAN_OK);
    EXPECT_EQ(kvplan_options_set_host_capacity_bytes(opt, 4ull << 20), KVPLAN_OK);
    EXPECT_EQ(kvplan_options_set_device_capacity_bytes(opt, 4ull << 20), KVPLAN_OK);
    return opt;
  }
};

TEST_F(CApiTest, StoreLookupLoad) {
  kvplan_options* opt = nullptr;
  ASSERT_EQ(kvplan_options_create(&opt), KVPLAN_OK);
  ASSERT_EQ(kvplan_options_set_chunk_tokens(opt, 32), KVPLAN_OK);
  ASSERT_EQ(kvplan_options_set_host_capacity_bytes(opt, 16ull << 20), KVPLAN_OK);
  ASSERT_EQ(kvplan_options_set_device_capacity_bytes(opt, 16ull << 20), KVPLAN_OK);
  ASSERT_EQ(kvplan_options_set_model_geometry(opt, 5, 2, 64), KVPLAN_OK);
  ASSERT_EQ(kvplan_options_set_hash_threads(opt, 2), KVPLAN_OK);
  kvplan_runtime* rt = nullptr;
  ASSERT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_OK)
      << kvplan_last_error_message();
  kvplan_options_destroy(opt);
  EXPECT_EQ(kvplan_runtime_transfer_group_count(rt), 3u);

  std::mt19937_64 rng(5);
  const auto tokens = test::random_tokens(rng, 70);
  kvplan_device_chunk* c = nullptr;
  ASSERT_EQ(kvplan_runtime_acquire_chunk(rt, tokens.data(), tokens.size(), 0, &c), KVPLAN_OK);
  std::vector<std::byte> bytes(kvplan_device_chunk_bytes(c)), back(bytes.size());
  test::fill_pattern(bytes.data(), bytes.size(), 99);
  ASSERT_EQ(kvplan_device_chunk_write(rt, c, 0, bytes.data(), bytes.size()), KVPLAN_OK);
  kvplan_transfer* t = nullptr;
  ASSERT_EQ(kvplan_runtime_store(rt, c, nullptr, &t), KVPLAN_OK);
  EXPECT_EQ(kvplan_transfer_wait(t), KVPLAN_OK);
  EXPECT_EQ(kvplan_transfer_ready(t), 1);
  kvplan_transfer_destroy(t);
  ASSERT_EQ(kvplan_device_chunk_release(rt, c), KVPLAN_OK);
  // Drop the device copy so the load has to come from the host tier.
  uint64_t key = 0, n_keys = 0;
  ASSERT_EQ(kvplan_runtime_chunk_keys(rt, tokens.data(), tokens.size(), &key, 1, &n_keys),
            KVPLAN_OK);
  EXPECT_EQ(n_keys, 2u);

  int32_t tiers[2] = {-1, -1};
  uint64_t prefix = 0;
  ASSERT_EQ(kvplan_runtime_lookup(rt, tokens.data(), tokens.size(), tiers, 2, &prefix), KVPLAN_OK);
  EXPECT_EQ(prefix, 1u);
  EXPECT_EQ(tiers[0], KVPLAN_TIER_DEVICE);
  EXPECT_EQ(tiers[1], KVPLAN_TIER_MISS);

  ASSERT_EQ(kvplan_runtime_load(rt, tokens.data(), tokens.size(), UINT64_MAX, &t), KVPLAN_OK);
  EXPECT_EQ(kvplan_transfer_wait(t), KVPLAN_OK);
  ASSERT_EQ(kvplan_transfer_chunk_count(t), 1u);
  kvplan_device_chunk* loaded = nullptr;
  ASSERT_EQ(kvplan_transfer_take_chunk(t, 0, &loaded), KVPLAN_OK);
  EXPECT_EQ(kvplan_transfer_take_chunk(t, 0, &loaded), KVPLAN_OUT_OF_RANGE);
  kvplan_transfer_destroy(t);
  ASSERT_EQ(kvplan_device_chunk_read(rt, loaded, 0, back.data(), back.size()), KVPLAN_OK);
  EXPECT_EQ(back, bytes);
  EXPECT_EQ(kvplan_device_chunk_key(loaded), key);
  ASSERT_EQ(kvplan_device_chunk_release(rt, loaded), KVPLAN_OK);

  kvplan_stats s{};
  ASSERT_EQ(kvplan_runtime_stats(rt, &s), KVPLAN_OK);
  EXPECT_EQ(s.stores_ok, 1u);
  EXPECT_EQ(s.bytes_device_to_host, bytes.size());
  EXPECT_EQ(kvplan_runtime_refusals(rt), 0u);
  kvplan_runtime_destroy(rt);
}

TEST_F(CApiTest, PerKvHeadLayersAreAddressedByHeadRun) {
  write_plan(plan_path, test::per_head_plan());
  kvplan_options* opt = small_options();
  ASSERT_EQ(kvplan_options_set_model_geometry(opt, 5, 3, 64), KVPLAN_OK);
  kvplan_runtime* rt = nullptr;
  ASSERT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_OK)
      << kvplan_last_error_message();
  kvplan_options_destroy(opt);
  EXPECT_EQ(kvplan_runtime_head_run_count(rt, 0), 1u);
  EXPECT_EQ(kvplan_runtime_head_run_count(rt, 1), 3u);
  EXPECT_EQ(kvplan_runtime_head_run_count(rt, 3), 2u);
  EXPECT_EQ(kvplan_runtime_head_run_count(rt, 5), 0u);
  uint32_t first = 0, n = 0;
  ASSERT_EQ(kvplan_runtime_head_run_info(rt, 3, 1, &first, &n), KVPLAN_OK);
  EXPECT_EQ(first, 2u);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(kvplan_runtime_head_run_info(rt, 3, 2, &first, &n), KVPLAN_OUT_OF_RANGE);
  // A layer of several runs is not one page: the layer-addressed calls refuse it.
  uint64_t offset = 0, bytes = 0, n_values = 0;
  EXPECT_EQ(kvplan_runtime_page_info(rt, 1, 0, KVPLAN_KEY, &offset, &bytes, &n_values),
            KVPLAN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvplan_last_error_message()).find("layer 1"), std::string::npos);
  ASSERT_EQ(kvplan_runtime_page_info(rt, 0, 0, KVPLAN_KEY, &offset, &bytes, &n_values), KVPLAN_OK);

  // Pack each run's page of a chunk, store it, load it back: the bytes and the values return.
  std::mt19937_64 rng(8);
  std::normal_distribution<float> normal(0.f, 1.f);
  const auto tokens = test::random_tokens(rng, 32);
  kvplan_device_chunk* c = nullptr;
  ASSERT_EQ(kvplan_runtime_acquire_chunk(rt, tokens.data(), tokens.size(), 0, &c), KVPLAN_OK);
  std::vector<uint8_t> image(kvplan_device_chunk_bytes(c));
  std::map<std::tuple<uint32_t, uint32_t, uint64_t, int32_t>, std::vector<float>> values;
  for (uint32_t l = 0; l < kvplan_runtime_layer_count(rt); ++l) {
    for (uint32_t r = 0; r < kvplan_runtime_head_run_count(rt, l); ++r) {
      for (uint64_t p = 0; p < 2; ++p) {
        for (const int32_t side : {KVPLAN_KEY, KVPLAN_VALUE}) {
          ASSERT_EQ(kvplan_runtime_run_page_info(rt, l, r, p, side, &offset, &bytes, &n_values),
                    KVPLAN_OK);
          ASSERT_LE(offset + bytes, image.size());
          std::vector<float>& v = values[{l, r, p, side}];
          v.resize(n_values);
          for (float& x : v) x = normal(rng);
          ASSERT_EQ(kvplan_runtime_pack_run_page(rt, l, r, side, v.data(), v.size(),
                                                 image.data() + offset, bytes),
                    KVPLAN_OK)
              << kvplan_last_error_message();
        }
      }
    }
  }
  ASSERT_EQ(kvplan_device_chunk_write(rt, c, 0, image.data(), image.size()), KVPLAN_OK);
  kvplan_transfer* t = nullptr;
  ASSERT_EQ(kvplan_runtime_store(rt, c, nullptr, &t), KVPLAN_OK);
  EXPECT_EQ(kvplan_transfer_wait(t), KVPLAN_OK);
  kvplan_transfer_destroy(t);
  ASSERT_EQ(kvplan_device_chunk_release(rt, c), KVPLAN_OK);
  ASSERT_EQ(kvplan_runtime_load(rt, tokens.data(), tokens.size(), UINT64_MAX, &t), KVPLAN_OK);
  EXPECT_EQ(kvplan_transfer_wait(t), KVPLAN_OK);
  ASSERT_EQ(kvplan_transfer_chunk_count(t), 1u);
  kvplan_device_chunk* loaded = nullptr;
  ASSERT_EQ(kvplan_transfer_take_chunk(t, 0, &loaded), KVPLAN_OK);
  kvplan_transfer_destroy(t);
  std::vector<uint8_t> back(image.size());
  ASSERT_EQ(kvplan_device_chunk_read(rt, loaded, 0, back.data(), back.size()), KVPLAN_OK);
  EXPECT_EQ(back, image);
  ASSERT_EQ(kvplan_device_chunk_release(rt, loaded), KVPLAN_OK);
  // Layer 3's bf16 run gives its values back exactly.
  ASSERT_EQ(kvplan_runtime_run_page_info(rt, 3, 1, 0, KVPLAN_VALUE, &offset, &bytes, &n_values),
            KVPLAN_OK);
  std::vector<float> unpacked(n_values);
  ASSERT_EQ(kvplan_runtime_unpack_run_page(rt, 3, 1, KVPLAN_VALUE, back.data() + offset, bytes,
                                           unpacked.data(), unpacked.size()),
            KVPLAN_OK);
  EXPECT_EQ(n_values, 16u * 1 * 64);
  const std::vector<float>& original = values[{3u, 1u, uint64_t{0}, int32_t{KVPLAN_VALUE}}];
  for (size_t i = 0; i < unpacked.size(); ++i) {
    EXPECT_NEAR(unpacked[i], original[i], std::fabs(original[i]) / 128) << "value " << i;
  }
  EXPECT_EQ(kvplan_runtime_refusals(rt), 0u);
  kvplan_runtime_destroy(rt);
}

TEST_F(CApiTest, ErrorsAreCodesAndMessages) {
  kvplan_runtime* rt = nullptr;
  EXPECT_EQ(kvplan_runtime_create("/nonexistent/plan.json", nullptr, &rt), KVPLAN_NOT_FOUND);
  EXPECT_NE(std::string(kvplan_last_error_message()).find("/nonexistent/plan.json"),
            std::string::npos);
  EXPECT_EQ(rt, nullptr);
  EXPECT_EQ(kvplan_runtime_create(nullptr, nullptr, &rt), KVPLAN_INVALID_ARGUMENT);
  kvplan_options* opt = nullptr;
  ASSERT_EQ(kvplan_options_create(&opt), KVPLAN_OK);
  EXPECT_EQ(kvplan_options_set_hash_threads(opt, -2), KVPLAN_INVALID_ARGUMENT);
  EXPECT_EQ(kvplan_options_set_hash_threads(opt, 257), KVPLAN_INVALID_ARGUMENT);
  ASSERT_EQ(kvplan_options_set_model_geometry(opt, 5, 4, 64), KVPLAN_OK);
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvplan_last_error_message()).find("KV heads"), std::string::npos);
  ASSERT_EQ(kvplan_options_set_model_geometry(opt, 5, 2, 64), KVPLAN_OK);
  ASSERT_EQ(kvplan_options_set_chunk_tokens(opt, 24), KVPLAN_OK);  // not a multiple of 16
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_INVALID_ARGUMENT);
  kvplan_options_destroy(opt);
  EXPECT_EQ(kvplan_transfer_wait(nullptr), KVPLAN_INVALID_ARGUMENT);
  EXPECT_EQ(kvplan_runtime_abi_version(), static_cast<uint32_t>(KVPLAN_RUNTIME_ABI_VERSION));
}

TEST_F(CApiTest, PlanIsRefusedUnlessTheServedModelIsGivenOrTheCheckWaived) {
  kvplan_runtime* rt = nullptr;
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), nullptr, &rt), KVPLAN_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  kvplan_options* opt = small_options();
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  const std::string msg = kvplan_last_error_message();
  for (const char* part :
       {"'tiny'", "5 layers", "2 KV heads x head_dim 64", "00000000feedbeef",
        "kvplan_options_set_model_geometry", "kvplan_options_set_model_fingerprint",
        "kvplan_options_set_skip_model_check"}) {
    EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;
  }
  // An empty fingerprint is no identity either.
  ASSERT_EQ(kvplan_options_set_model_fingerprint(opt, ""), KVPLAN_OK);
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_INVALID_ARGUMENT);
  // The explicit opt-out runs the plan unchecked; switching it off again restores the check.
  ASSERT_EQ(kvplan_options_set_skip_model_check(opt, 1), KVPLAN_OK);
  ASSERT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_OK)
      << kvplan_last_error_message();
  kvplan_runtime_destroy(rt);
  rt = nullptr;
  ASSERT_EQ(kvplan_options_set_skip_model_check(opt, 0), KVPLAN_OK);
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_INVALID_ARGUMENT);
  EXPECT_EQ(kvplan_options_set_skip_model_check(nullptr, 1), KVPLAN_INVALID_ARGUMENT);
  kvplan_options_destroy(opt);
}

TEST_F(CApiTest, PlanForAnotherModelFingerprintIsRefused) {
  kvplan_options* opt = small_options();
  kvplan_runtime* rt = nullptr;
  ASSERT_EQ(kvplan_options_set_model_fingerprint(opt, "00000000deadbeef"), KVPLAN_OK);
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  const std::string msg = kvplan_last_error_message();
  EXPECT_NE(msg.find("00000000feedbeef"), std::string::npos) << msg;
  EXPECT_NE(msg.find("00000000deadbeef"), std::string::npos) << msg;
  // Waiving the check does not waive a fingerprint the caller did give.
  ASSERT_EQ(kvplan_options_set_skip_model_check(opt, 1), KVPLAN_OK);
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_INVALID_ARGUMENT);
  ASSERT_EQ(kvplan_options_set_skip_model_check(opt, 0), KVPLAN_OK);
  ASSERT_EQ(kvplan_options_set_model_fingerprint(opt, "00000000feedbeef"), KVPLAN_OK);
  ASSERT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_OK)
      << kvplan_last_error_message();
  kvplan_runtime_destroy(rt);
  kvplan_options_destroy(opt);
}

TEST_F(CApiTest, FingerprintAloneCannotVouchForAPlanThatRecordsNone) {
  write_plan(plan_path, test::mixed_plan(2, 64, 16, ""));
  kvplan_options* opt = small_options();
  kvplan_runtime* rt = nullptr;
  ASSERT_EQ(kvplan_options_set_model_fingerprint(opt, "00000000feedbeef"), KVPLAN_OK);
  EXPECT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  const std::string msg = kvplan_last_error_message();
  EXPECT_NE(msg.find("records no model fingerprint"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kvplan_options_set_model_geometry"), std::string::npos) << msg;
  ASSERT_EQ(kvplan_options_set_model_geometry(opt, 5, 2, 64), KVPLAN_OK);
  ASSERT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_OK)
      << kvplan_last_error_message();
  kvplan_runtime_destroy(rt);
  kvplan_options_destroy(opt);
}

TEST_F(CApiTest, BackendNameSaysWhetherDeviceMemoryIsAGpu) {
  kvplan_options* opt = small_options();
  ASSERT_EQ(kvplan_options_set_model_geometry(opt, 5, 2, 64), KVPLAN_OK);
  kvplan_runtime* rt = nullptr;
  ASSERT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_OK)
      << kvplan_last_error_message();
  kvplan_options_destroy(opt);
  const std::string name = kvplan_runtime_backend_name(rt);
  if (gpu_present()) {
    EXPECT_NE(name, KVPLAN_BACKEND_HOST);
    EXPECT_NE(name.find(gpu::backend_name()), std::string::npos) << name;
  } else {
    EXPECT_EQ(name, KVPLAN_BACKEND_HOST);
  }
  kvplan_runtime_destroy(rt);
  EXPECT_STREQ(kvplan_runtime_backend_name(nullptr), "");
}

TEST_F(CApiTest, RequiringAGpuFailsWithTheReasonWhenThereIsNone) {
  kvplan_options* opt = small_options();
  ASSERT_EQ(kvplan_options_set_model_geometry(opt, 5, 2, 64), KVPLAN_OK);
  ASSERT_EQ(kvplan_options_set_require_gpu(opt, 1), KVPLAN_OK);
  kvplan_runtime* rt = nullptr;
  const kvplan_status s = kvplan_runtime_create(plan_path.c_str(), opt, &rt);
  if (gpu_present()) {
    ASSERT_EQ(s, KVPLAN_OK) << kvplan_last_error_message();
    EXPECT_NE(std::string(kvplan_runtime_backend_name(rt)), KVPLAN_BACKEND_HOST);
    kvplan_runtime_destroy(rt);
  } else {
    EXPECT_EQ(s, gpu::compiled_in() ? KVPLAN_NOT_FOUND : KVPLAN_UNIMPLEMENTED);
    EXPECT_EQ(rt, nullptr);
    const std::string msg = kvplan_last_error_message();
    EXPECT_NE(msg.find("a GPU is required (kvplan_options_set_require_gpu)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(gpu::compiled_in() ? "found no GPU" : "no GPU support compiled in"),
              std::string::npos)
        << msg;
  }
  // Not required (the default, or switched back off): the host stands in without a GPU.
  ASSERT_EQ(kvplan_options_set_require_gpu(opt, 0), KVPLAN_OK);
  ASSERT_EQ(kvplan_runtime_create(plan_path.c_str(), opt, &rt), KVPLAN_OK)
      << kvplan_last_error_message();
  kvplan_runtime_destroy(rt);
  EXPECT_EQ(kvplan_options_set_require_gpu(nullptr, 1), KVPLAN_INVALID_ARGUMENT);
  kvplan_options_destroy(opt);
}

}  // namespace
}  // namespace kvplan
