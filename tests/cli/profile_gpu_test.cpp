// `kvplan profile --device gpu` against `--device cpu` on stories260K: the attention-side metrics
// that run as HIP kernels (e_a, e_o) agree with the CPU's to rounding, and the rest (e_k, e_v from
// the CPU round trip, dKL from the CPU forward passes) are identical. Skips without a GPU.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli/run_kvplan.h"
#include "profile/profile_data.h"
#include "test_paths.h"

namespace kvplan::test {
namespace {

namespace fs = std::filesystem;

bool near(double a, double b) {
  return std::abs(a - b) <= 1e-3 * std::max(std::abs(a), std::abs(b)) + 1e-7;
}

TEST(ProfileOnGpu, AttentionMetricsMatchTheCpuPath) {
  const RunResult probe = run_kvplan("bench kernels --tokens 64 --batch 1 --iters 1 --formats f16");
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  if (probe.out.find("NO GPU") != std::string::npos) GTEST_SKIP() << "no GPU";
  const std::string model = (models_dir() / "stories260K.gguf").string();
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const fs::path dir = fs::temp_directory_path() / "kvplan_profile_gpu_test";
  fs::create_directories(dir);
  const std::string common = "-q profile --model " + model +
                             " --num-prompts 4 --max-tokens 64 --kl-prompts 2 "
                             "--candidates KV8,K8V4,KV4,K4V2,KV2 -o ";
  const RunResult cpu = run_kvplan(common + (dir / "cpu.json").string() + " --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  const RunResult gpu = run_kvplan(common + (dir / "gpu.json").string() + " --device gpu");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  const Profile a = read_profile((dir / "cpu.json").string());
  const Profile b = read_profile((dir / "gpu.json").string());
  EXPECT_EQ(a.timings.attention_device.value_or(""), "cpu");
  EXPECT_EQ(b.timings.attention_device.value_or(""), "gpu");
  ASSERT_EQ(a.cells.size(), b.cells.size());
  for (size_t l = 0; l < a.cells.size(); ++l) {
    for (size_t c = 0; c < a.cells[l].size(); ++c) {
      ASSERT_TRUE(a.cells[l][c] && b.cells[l][c]);
      const CellMetrics& x = a.cells[l][c]->metrics;
      const CellMetrics& y = b.cells[l][c]->metrics;
      EXPECT_EQ(x.e_k, y.e_k) << l << "/" << c;
      EXPECT_EQ(x.e_v, y.e_v) << l << "/" << c;
      EXPECT_EQ(x.dkl, y.dkl) << l << "/" << c;
      EXPECT_TRUE(near(x.e_a, y.e_a)) << l << "/" << c << ": " << x.e_a << " vs " << y.e_a;
      EXPECT_TRUE(near(x.e_o, y.e_o)) << l << "/" << c << ": " << x.e_o << " vs " << y.e_o;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvplan::test
