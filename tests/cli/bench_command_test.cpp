// `kvplan bench kernels` and `--device` end to end (CPU reference paths on a machine without a
// GPU).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"

namespace kvplan::test {
namespace {

TEST(BenchKernels, CpuReferenceJsonHasEveryFormatAndTheCopyReference) {
  const RunResult r = run_kvplan(
      "bench kernels --device cpu --tokens 256 --batch 2 --kv-heads 2 --heads 4 --head-dim 64 "
      "--formats q4_0,int4,f16 --iters 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "cpu-reference");
  EXPECT_EQ(j["copy_kind"], "memcpy");
  EXPECT_GT(j["copy_gbps"].get<double>(), 0.0);
  ASSERT_EQ(j["formats"].size(), 3u);
  for (const auto& f : j["formats"]) {
    EXPECT_GT(f["pack_gbps"].get<double>(), 0.0) << f["format"];
    EXPECT_GT(f["unpack_gbps"].get<double>(), 0.0) << f["format"];
    EXPECT_GT(f["decode_gbps"].get<double>(), 0.0) << f["format"];
  }
  EXPECT_EQ(j["shape"]["tokens"], 256);
}

TEST(BenchKernels, TextSaysWhenItIsNotAGpuRun) {
  const RunResult r = run_kvplan(
      "bench kernels --device cpu --tokens 64 --batch 1 --head-dim 32 --heads 8 --formats q8_0 "
      "--iters 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NO GPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memcpy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("q8_0"), std::string::npos) << r.out;
}

TEST(BenchKernels, BadInputExitsWithTwo) {
  EXPECT_EQ(run_kvplan("bench kernels --device tpu").exit_code, 2);
  EXPECT_EQ(run_kvplan("bench kernels --device cpu --formats slot:8 --tokens 64").exit_code, 2);
  EXPECT_EQ(run_kvplan("bench kernels --device cpu --heads 6 --kv-heads 4").exit_code, 2);
  EXPECT_EQ(run_kvplan("bench kernels --device cpu --tokens 100").exit_code, 2);
}

TEST(DeviceOption, AutoFallsBackToTheCpuInOneLineAndGpuFailsWithAReason) {
  const RunResult any = run_kvplan("bench kernels --tokens 64 --batch 1 --iters 1 --formats f16");
  ASSERT_EQ(any.exit_code, 0) << any.err;
  if (any.out.find("NO GPU") == std::string::npos) GTEST_SKIP() << "a GPU is present";
  EXPECT_NE(any.err.find("falling back to the CPU"), std::string::npos) << any.err;
  const RunResult gpu = run_kvplan("bench kernels --device gpu --tokens 64");
  EXPECT_NE(gpu.exit_code, 0);
  EXPECT_NE(gpu.err.find("--device gpu:0"), std::string::npos) << gpu.err;
}

}  // namespace
}  // namespace kvplan::test
