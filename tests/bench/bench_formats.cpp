// Pack/unpack throughput of KV formats on one core, as GB/s of f32 values, beside memcpy bandwidth
// measured in the same run on buffers of the same size (the physical reference).
//
//   kvplan_bench_formats [--mib 64] [--head-dim 128] [--repeats 5]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "formats/format_size.h"
#include "formats/pack.h"

namespace {

// On-CPU time of this thread: a shared 2-core machine deschedules us, wall time would charge that
// to whichever measurement it hit. Reference and subject are timed the same way.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <typename F>
double best_seconds(int repeats, F&& work) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = thread_cpu_seconds();
    work();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 64, head_dim = 128;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mib") mib = std::stoul(argv[i + 1]);
    if (flag == "--head-dim") head_dim = std::stoul(argv[i + 1]);
    if (flag == "--repeats") repeats = std::stoi(argv[i + 1]);
  }
  const size_t n_values = mib * 1024 * 1024 / sizeof(float) / head_dim * head_dim;
  const size_t rows = n_values / head_dim;
  const double f32_bytes = static_cast<double>(n_values * sizeof(float));

  std::vector<float> src(n_values), dst(n_values);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : src) v = normal(rng);

  // memcpy reference: read + write of the f32 buffer.
  const double memcpy_s =
      best_seconds(repeats, [&] { std::memcpy(dst.data(), src.data(), n_values * sizeof(float)); });
  const double memcpy_gbs = f32_bytes / memcpy_s / 1e9;
  std::printf("one core, %zu MiB of f32 (%zu rows of head_dim %zu), best of %d, thread CPU time\n",
              mib, rows, head_dim, repeats);
  std::printf("memcpy reference: %.2f GB/s\n\n", memcpy_gbs);
  std::printf("%-8s %10s %10s %12s %12s\n", "format", "pack GB/s", "unpack", "pack/memcpy",
              "unpack/memcpy");

  for (const char* name : {"int4", "int2", "q4_0", "q8_0", "int8", "fp8_e4m3", "f16"}) {
    const kvplan::Format f = kvplan::Format::parse(name);
    const kvplan::PackOptions opt{.group_size = 32, .fp8_scale = 0.01f};
    const size_t row_bytes = kvplan::packed_row_bytes(f, head_dim, opt.group_size);
    std::vector<uint8_t> packed(rows * row_bytes);
    const double pack_s = best_seconds(
        repeats, [&] { kvplan::pack_rows(f, src.data(), rows, head_dim, packed.data(), opt); });
    const double unpack_s = best_seconds(
        repeats, [&] { kvplan::unpack_rows(f, packed.data(), rows, head_dim, dst.data(), opt); });
    const double pack_gbs = f32_bytes / pack_s / 1e9, unpack_gbs = f32_bytes / unpack_s / 1e9;
    std::printf("%-8s %10.2f %10.2f %11.2fx %12.2fx\n", name, pack_gbs, unpack_gbs,
                pack_gbs / memcpy_gbs, unpack_gbs / memcpy_gbs);
  }
  return 0;
}
