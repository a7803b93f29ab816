// The GPU kernels against src/formats and f64 references: the same scenarios as
// kernel_reference_test.cpp, run on the device. Skipped, with the reason, when this build has no
// GPU backend or the runtime finds no device.
#include <gtest/gtest.h>

#include "kv_cases.h"

namespace kvplan::test {
namespace {

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu::compiled_in())
      GTEST_SKIP() << "no GPU build (configure with -DKVPLAN_HIP=AMD|NVIDIA)";
    int n = 0;
    const gpu::Status s = gpu::device_count(&n);
    if (!s.ok())
      GTEST_SKIP() << gpu::backend_name() << ": " << s.message << " (" << s.api_error << ")";
    gpu::DeviceInfo info;
    KVPLAN_EXPECT_OK(gpu::device_info(0, &info));
    KVPLAN_EXPECT_OK(gpu::set_device(0));
    std::printf("[ gpu      ] %s: %s\n", gpu::backend_name(), info.name);
  }
};

TEST_F(GpuKernels, PackUnpackBitIdenticalToSrcFormats) {
  uint32_t seed = 500;
  for (const Format& f : kernel_formats()) {
    for (const int D : pack_test_head_dims(f)) {
      for (DenseType type : {DenseType::kF32, DenseType::kF16, DenseType::kBF16}) {
        check_pack_unpack({f, D, 3, 32, type, 37, 5, 16, seed++}, true);
      }
    }
    if (f.info().block_values() == 0 && !f.info().rotated()) {
      check_pack_unpack({f, 40, 2, 24, DenseType::kF32, 19, 0, 8, seed++}, true);
      check_pack_unpack({f, 96, 2, 64, DenseType::kBF16, 9, 3, 4, seed++}, true);
      check_pack_unpack({f, 256, 1, 512, DenseType::kF16, 5, 1, 16, seed++}, true);
    }
    // A long run: many blocks of threads.
    check_pack_unpack({f, 128, 8, 32, DenseType::kF16, 2048, 0, 16, seed++}, true);
  }
}

TEST_F(GpuKernels, DecodeAttentionMatchesF64) {
  const auto F = [](const char* name) { return Format::parse(name); };
  check_decode({F("f16"), F("f16"), 128, 8, 2, 32, {1, 100, 517}, 16, 0, 1}, true);
  check_decode({F("q8_0"), F("q4_0"), 128, 8, 2, 32, {300, 33, 2}, 16, 3, 2}, true);
  check_decode({F("int4"), F("int2"), 64, 4, 4, 32, {257, 16, 17}, 8, 0, 3}, true);
  check_decode({F("fp8_e4m3"), F("iq4_nl"), 96, 6, 1, 32, {90, 1}, 32, 5, 4}, true);
  check_decode({F("q5_1"), F("int8"), 256, 8, 1, 64, {64, 200}, 16, 2, 5}, true);
  check_decode({F("bf16"), F("q5_0"), 128, 16, 2, 32, {1000}, 16, 0, 6}, true);
  check_decode({F("f32"), F("fp8_e5m2"), 32, 2, 2, 32, {45, 3, 77, 128}, 4, 7, 7}, true);
  check_decode({F("q4_1"), F("f32"), 64, 1, 1, 16, {31, 32, 33}, 16, 1, 8}, true);
  check_decode({F("tq_mse4"), F("tq_int4"), 128, 4, 2, 32, {70, 5}, 16, 0, 9}, true);
  check_decode({F("tq_mse3"), F("tq_int3"), 64, 2, 1, 32, {33, 90}, 16, 2, 10}, true);
  check_decode({F("tq_fp8"), F("tq_int4"), 256, 8, 2, 32, {17}, 16, 1, 11}, true);
  // Rotated rows: keys whole (one unit per row), values in spans of 64 (two units per row).
  check_decode({F("q5_0_had"), F("iq4_nl_had64"), 128, 4, 2, 32, {65, 7}, 16, 1, 12}, true);
  // ik_llama.cpp's 6-bit blocks, plain keys and values rotated in spans of 64.
  check_decode({F("q6_0"), F("q6_0_had64"), 128, 4, 2, 32, {40, 129}, 16, 0, 13}, true);
  // Long contexts, batch 8, default splits.
  check_decode(
      {F("q8_0"), F("q4_0"), 128, 32, 8, 32, {8192, 4096, 1, 3000, 8191, 17, 5000, 2048}, 16, 0, 9},
      true);
}

TEST_F(GpuKernels, BatchedAttentionMatchesF64) {
  const auto F = [](const char* name) { return Format::parse(name); };
  check_batched({F("q4_0"), F("int4"), 64, 4, 2, 32, 24, 64, 0, 16, 1}, true);
  check_batched({F("f16"), F("fp8_e4m3"), 64, 4, 2, 32, 24, 64, 17, 16, 2}, true);
  check_batched({F("int2"), F("q8_0"), 128, 8, 8, 32, 50, 50, 0, 8, 3}, true);
  check_batched({F("q5_0"), F("iq4_nl"), 128, 8, 2, 32, 300, 700, 0, 16, 4}, true);
}

TEST_F(GpuKernels, LaunchersReportBadParameters) {
  gpu::PackPageParams p;  // empty: src null
  const gpu::Status s = gpu::pack_page(p, nullptr);
  EXPECT_EQ(s.code, gpu::StatusCode::kInvalidArgument) << s.message;
}

}  // namespace
}  // namespace kvplan::test
