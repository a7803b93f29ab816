// gpu::DeviceBuffer: ownership and growth on a device when there is one; without one, that an
// allocation fails with the bridge's error instead of handing out a null buffer.
#include "gpu/device_buffer.h"

#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

bool gpu_present() {
  int n = 0;
  return gpu::compiled_in() && gpu::device_count(&n).ok() && n > 0 && gpu::set_device(0).ok();
}

TEST(DeviceBuffer, EmptyBuffersNeedNoDevice) {
  gpu::DeviceBuffer a;
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  gpu::DeviceBuffer b(0, "nothing");
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.reserve(0, "nothing"), nullptr);
  EXPECT_TRUE(b.reset().ok());
}

TEST(DeviceBuffer, WithoutADeviceAllocationFailsWithTheReason) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present";
  try {
    gpu::DeviceBuffer b(256, "test buffer");
    FAIL() << "allocated 256 bytes without a GPU";
  } catch (const Error& e) {
    // Without a backend: unimplemented. A HIP build on a machine without a GPU gets whatever
    // hipMalloc reports (hipErrorInvalidDevice), which is the allocation's failure.
    if (!gpu::compiled_in()) {
      EXPECT_EQ(e.code(), ErrorCode::kUnimplemented) << e.what();
    }
    EXPECT_NE(std::string(e.what()).find("test buffer: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(" of 256 bytes failed: "), std::string::npos) << e.what();
  }
}

TEST(DeviceBuffer, OwnsGrowsAndMovesItsMemory) {
  if (!gpu_present()) GTEST_SKIP() << "no GPU: " << gpu::backend_name();
  std::mt19937 rng(11);
  std::vector<uint32_t> host(1000);
  for (uint32_t& x : host) x = rng();
  const size_t bytes = host.size() * sizeof(uint32_t);

  gpu::DeviceBuffer a(bytes, "a");
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.size(), bytes);
  ASSERT_TRUE(gpu::copy_to_device(a.data(), host.data(), bytes, nullptr).ok());
  // A smaller request reuses the allocation.
  EXPECT_EQ(a.reserve(bytes / 2, "a"), a.data());
  EXPECT_EQ(a.size(), bytes);

  gpu::DeviceBuffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.size(), 0u);
  std::vector<uint32_t> back(host.size());
  ASSERT_TRUE(gpu::copy_to_host(back.data(), b.as<uint32_t>(), bytes, nullptr).ok());
  ASSERT_TRUE(gpu::stream_synchronize(nullptr).ok());
  EXPECT_EQ(back, host);

  // A larger request gives at least that much, usable end to end.
  std::vector<uint32_t> big(3 * host.size());
  std::iota(big.begin(), big.end(), 7u);
  uint32_t* d = b.reserve<uint32_t>(big.size(), "b");
  EXPECT_EQ(b.size(), big.size() * sizeof(uint32_t));
  ASSERT_TRUE(gpu::copy_to_device(d, big.data(), b.size(), nullptr).ok());
  std::vector<uint32_t> big_back(big.size());
  ASSERT_TRUE(gpu::copy_to_host(big_back.data(), d, b.size(), nullptr).ok());
  ASSERT_TRUE(gpu::stream_synchronize(nullptr).ok());
  EXPECT_EQ(big_back, big);
  EXPECT_TRUE(b.reset().ok());
  EXPECT_EQ(b.data(), nullptr);
}

}  // namespace
}  // namespace kvplan
