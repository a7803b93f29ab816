// The runtime over a real GPU: device pages in GPU memory, the host tier in hipHostMalloc memory.
// Runs where a GPU build finds a device (scripts/gpu-check.sh); elsewhere it checks that asking for
// the GPU backend fails with the reason and that the default backend is the host stand-in.
#include "runtime/gpu_device_backend.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/gpu_runtime.h"
#include "runtime/offload_runtime.h"
#include "runtime_test_util.h"

namespace kvplan {
namespace {

bool gpu_present() {
  int n = 0;
  return gpu::compiled_in() && gpu::device_count(&n).ok() && n > 0;
}

TEST(GpuBackend, UnavailableGpuIsReportedNotFakedWithHostMemory) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present";
  try {
    (void)make_gpu_device_backend(0);
    FAIL() << "make_gpu_device_backend succeeded without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), gpu::compiled_in() ? ErrorCode::kNotFound : ErrorCode::kUnimplemented)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("GPU device backend"), std::string::npos) << e.what();
  }
  EXPECT_NE(make_default_device_backend()->name().find("host"), std::string_view::npos);
}

TEST(GpuBackend, PagesSurviveDeviceHostDiskAndBack) {
  if (!gpu_present()) GTEST_SKIP() << "no GPU: " << gpu::backend_name();
  const Plan plan = test::mixed_plan();
  const PlanLayout layout(plan, {.chunk_tokens = 32});
  RuntimeOptions o;
  o.backend = make_gpu_device_backend(0);
  o.chunk_tokens = 32;
  o.device_capacity_bytes = 2 * layout.chunk_bytes();
  o.host_capacity_bytes = 2 * stored_chunk_bytes(layout);
  o.disk_dir = std::filesystem::temp_directory_path() / "kvplan_gpu_backend_test";
  o.disk_capacity_bytes = 8 * stored_chunk_bytes(layout);
  o.disk_fsync = false;
  std::filesystem::remove_all(o.disk_dir);
  OffloadRuntime rt(plan, o);
  EXPECT_EQ(rt.backend().name().find("host"), std::string_view::npos) << rt.backend().name();

  std::mt19937_64 rng(5);
  const auto tokens = test::random_tokens(rng, 32 * 6);
  const auto keys = rt.keys(tokens);
  std::vector<std::byte> bytes(layout.chunk_bytes());
  for (uint64_t key : keys) {  // 6 chunks through 2 device and 2 host slots: the rest spill to disk
    const DeviceChunk c = rt.acquire_device(key);
    test::fill_pattern(bytes.data(), bytes.size(), key);
    rt.write_device(c, 0, bytes);
    ASSERT_TRUE(rt.store(c).get().ok);
    rt.release(c);
  }
  rt.flush();
  for (uint64_t key : keys) (void)rt.evict_from(key, Tier::kDevice);
  const LoadResult loaded = rt.load(tokens).get();
  ASSERT_TRUE(loaded.status.ok) << loaded.status.message;
  ASSERT_EQ(loaded.chunks.size(), keys.size());
  for (const DeviceChunk& c : loaded.chunks) {
    std::fill(bytes.begin(), bytes.end(), std::byte{0});
    rt.read_device(c, 0, bytes);
    EXPECT_EQ(test::count_pattern_mismatches(bytes.data(), bytes.size(), c.key), 0u);
    rt.release(c);
  }
  const RuntimeStats s = rt.stats();
  EXPECT_GT(s.hits_disk, 0u);
  EXPECT_EQ(s.refusals, 0u);
  std::filesystem::remove_all(o.disk_dir);
}

}  // namespace
}  // namespace kvplan
