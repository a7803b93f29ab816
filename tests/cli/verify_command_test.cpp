// kvplan verify end to end through the built binary, and its check (cli/plan_verify.h) in-process
// with a tier's copy corrupted or dropped between spill and reload.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"
#include "core/error.h"
#include "runtime/plan_verify.h"
#include "runtime/runtime_test_util.h"
#include "runtime/stored_object.h"

namespace kvplan {
namespace {

namespace fs = std::filesystem;

TEST(VerifyCommand, MixedPlanIsExactThroughEveryTier) {
  const fs::path plan =
      fs::temp_directory_path() / ("kvplan_verify_" + std::to_string(::getpid()) + ".json");
  write_plan(plan, test::mixed_plan());
  const test::RunResult r = test::run_kvplan("verify --json --plan " + plan.string());
  fs::remove(plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["guard_violations"], 0);
  EXPECT_EQ(j["tiers_checked"], nlohmann::json({"device", "host", "disk"}));
  // One chunk came back from each of host and disk, and the disk one was read off the disk.
  const uint64_t chunk_bytes = j["chunk_bytes"].get<uint64_t>();
  const auto& tiers = j["tiers"];
  EXPECT_EQ(tiers["device"]["chunks"], 2);
  EXPECT_EQ(tiers["device"]["bytes_compared"], 2 * chunk_bytes);
  for (const char* t : {"host", "disk"}) {
    EXPECT_EQ(tiers[t]["chunks"], 1) << t;
    EXPECT_EQ(tiers[t]["bytes_compared"], chunk_bytes) << t;
    EXPECT_EQ(tiers[t]["mismatches"], 0) << t;
    EXPECT_EQ(tiers[t]["refusals"], 0) << t;
  }
  EXPECT_GT(tiers["disk"]["bytes_read"].get<uint64_t>(), chunk_bytes);  // payload plus headers
  ASSERT_EQ(j["layers"].size(), 5u);
  for (const auto& l : j["layers"]) {
    EXPECT_EQ(l["device_mismatches"], 0);
    EXPECT_EQ(l["host_mismatches"], 0);
    EXPECT_EQ(l["disk_mismatches"], 0);
    EXPECT_EQ(l["attention_device_vs_reloaded_max_abs_diff"], 0.0);
    EXPECT_GT(l["quality"]["attention_rel_error"].get<double>(), 0.0);  // quantization is lossy
  }
  EXPECT_LT(j["layers"][0]["quality"]["key_rel_error"].get<double>(), 0.01);  // bf16
}

// A scratch parent of the test's own, to see what verify leaves behind.
class VerifyPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    parent_ = fs::temp_directory_path() / ("kvplan_verify_t_" + std::to_string(::getpid()));
    fs::remove_all(parent_);
    fs::create_directories(parent_);
    options_.chunk_tokens = 32;
    options_.scratch_parent = parent_;
  }
  void TearDown() override { fs::remove_all(parent_); }
  [[nodiscard]] bool parent_empty() const { return fs::is_empty(parent_); }

  fs::path parent_;
  PlanVerifyOptions options_;
};

// Flips one byte in the middle of a stored object (inside a payload, past the first header).
void flip_middle_byte(std::span<std::byte> bytes) {
  bytes[bytes.size() / 2] ^= std::byte{0x5a};
}

TEST_F(VerifyPlan, PassesAndLeavesNoScratchDirectory) {
  const PlanVerifyResult r = verify_plan(test::mixed_plan(), options_);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.tiers_checked(), (std::vector<std::string>{"device", "host", "disk"}));
  EXPECT_EQ(r.disk_bytes_read, stored_chunk_bytes(PlanLayout(test::mixed_plan(), {32})));
  EXPECT_TRUE(parent_empty());
}

TEST_F(VerifyPlan, PerKvHeadPagesAreByteExactThroughEveryTier) {
  // Layers 1 and 3 page their KV heads as runs of different pairs; their bytes go through the
  // device pool, the host tier and the disk tier and come back identical, and attention over the
  // reloaded runs (each head unpacked from its own run's page) equals attention over the originals.
  const Plan plan = test::per_head_plan();
  const PlanVerifyResult r = verify_plan(plan, options_);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.tiers_checked(), (std::vector<std::string>{"device", "host", "disk"}));
  for (const Tier t : {Tier::kDevice, Tier::kHost, Tier::kDisk}) {
    EXPECT_GT(r.tier(t).chunks, 0u);
    EXPECT_EQ(r.tier(t).mismatches, 0u);
    EXPECT_EQ(r.tier(t).refusals, 0u);
  }
  const PlanLayout layout(plan, {32});
  EXPECT_EQ(r.transfer_groups, layout.groups().size());
  EXPECT_EQ(r.disk_bytes_read, stored_chunk_bytes(layout));
  ASSERT_EQ(r.layers.size(), 5u);
  EXPECT_EQ(r.layers[1].pair, "q8_0/q8_0, q4_0/q4_0, q8_0/q8_0");
  EXPECT_EQ(r.layers[3].pair, "q4_0/q4_0 x2, KV16");
  for (const LayerVerify& l : r.layers) {
    ASSERT_TRUE(l.attention_device_vs_reloaded_max_abs_diff.has_value());
    EXPECT_EQ(*l.attention_device_vs_reloaded_max_abs_diff, 0.0) << "layer " << l.layer;
  }
  // Each head unpacks its own format: layer 1 (one q4_0 head of three) loses more than bf16
  // (layer 0) and less than layer 3 (two q4_0 heads of three), which loses less than a layer of
  // q4_0 on every head (the per-layer mixed plan's layer 3).
  const PlanVerifyResult uniform = verify_plan(test::mixed_plan(3), options_);
  EXPECT_LT(r.layers[0].key_rel_error, r.layers[1].key_rel_error);
  EXPECT_LT(r.layers[1].key_rel_error, r.layers[3].key_rel_error);
  EXPECT_LT(r.layers[3].key_rel_error, uniform.layers[3].key_rel_error);
  EXPECT_TRUE(parent_empty());
}

TEST_F(VerifyPlan, CorruptDiskFileIsCreditedToTheDiskTier) {
  options_.before_reload = [](OffloadRuntime& rt, std::span<const uint64_t> keys) {
    const std::optional<fs::path> path = rt.disk_path_for_testing(keys[1]);
    ASSERT_TRUE(path && fs::exists(*path));
    std::fstream f(*path, std::ios::in | std::ios::out | std::ios::binary);
    std::vector<char> bytes(fs::file_size(*path));
    f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    flip_middle_byte(std::as_writable_bytes(std::span(bytes)));
    f.seekp(0);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  const PlanVerifyResult r = verify_plan(test::mixed_plan(), options_);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.tier(Tier::kDisk).chunks, 1u);
  EXPECT_EQ(r.tier(Tier::kDisk).refusals, 1u);
  EXPECT_EQ(r.tier(Tier::kDisk).bytes_compared, 0u);  // refused: never handed out
  EXPECT_EQ(r.refusals, 1u);
  // The host tier's chunk still came back whole, and is not blamed.
  EXPECT_EQ(r.tier(Tier::kHost).chunks, 1u);
  EXPECT_EQ(r.tier(Tier::kHost).refusals, 0u);
  EXPECT_EQ(r.tier(Tier::kHost).mismatches, 0u);
  EXPECT_EQ(r.tier(Tier::kHost).bytes_compared, r.chunk_bytes);
  EXPECT_TRUE(parent_empty());
}

TEST_F(VerifyPlan, CorruptHostCopyIsCreditedToTheHostTier) {
  options_.before_reload = [](OffloadRuntime& rt, std::span<const uint64_t> keys) {
    const std::span<std::byte> bytes = rt.host_object_bytes_for_testing(keys[0]);
    ASSERT_FALSE(bytes.empty());
    flip_middle_byte(bytes);
  };
  const PlanVerifyResult r = verify_plan(test::mixed_plan(), options_);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.tier(Tier::kHost).refusals, 1u);
  EXPECT_EQ(r.tier(Tier::kDisk).refusals, 0u);
  // The refused host chunk ended the loaded prefix: the disk chunk after it was not checked.
  EXPECT_EQ(r.tiers_checked(), (std::vector<std::string>{"device", "host"}));
  EXPECT_EQ(r.disk_bytes_read, 0u);
}

TEST_F(VerifyPlan, FailedCheckRemovesItsScratchDirectory) {
  // Dropping the disk copy leaves the load one chunk short, which the check reports by throwing.
  options_.before_reload = [this](OffloadRuntime& rt, std::span<const uint64_t> keys) {
    ASSERT_FALSE(parent_empty());  // the disk tier's files are under the scratch parent
    ASSERT_TRUE(rt.evict_from(keys[1], Tier::kDisk));
  };
  try {
    (void)verify_plan(test::mixed_plan(), options_);
    ADD_FAILURE() << "verify_plan did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("1 of 2 chunks"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(parent_empty());
}

TEST(VerifyCommand, SlotPlanHumanOutput) {
  const test::RunResult r = test::run_kvplan(std::string("verify --plan ") + KVPLAN_SOURCE_DIR +
                                             "/configs/plans/minimax-m2.5-slot134.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("OK: every byte came back"), std::string::npos);
  EXPECT_NE(r.out.find("opaque slot"), std::string::npos);
}

TEST(VerifyCommand, BadInputExitsTwo) {
  EXPECT_EQ(test::run_kvplan("verify --plan /nonexistent.json").exit_code, 2);
  const fs::path plan =
      fs::temp_directory_path() / ("kvplan_verify_b_" + std::to_string(::getpid()) + ".json");
  write_plan(plan, test::mixed_plan());
  EXPECT_EQ(test::run_kvplan("verify --plan " + plan.string() + " --model llama-3.1-8b").exit_code,
            2);
  EXPECT_EQ(test::run_kvplan("verify --plan " + plan.string() + " --chunk-tokens 24").exit_code, 2);
  fs::remove(plan);
}

}  // namespace
}  // namespace kvplan
