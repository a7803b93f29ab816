// Prefill and decode speed of the harness on SmolLM2-135M (or a model given on the command line),
// reported beside an Eigen GEMM rate measured in the same run, so the ratio means something on any
// machine.
//
// Also prints the process's peak resident memory next to the bytes of the weights as stored.
//
//   kvplan_bench_forward [--model M] [--threads 2] [--ctx 256] [--decode 64] [--kv K8V4]
//                        [--repeats 3]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "core/error.h"
#include "formats/kv_pair.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "test_paths.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// GFLOP/s of X[m,k] * W[n,k]^T with Eigen, best of a few repetitions (the shapes of a prefill
// chunk against the FFN up projection).
double eigen_gemm_gflops(Eigen::Index m, Eigen::Index k, Eigen::Index n) {
  kvplan::RowMatrix x = kvplan::RowMatrix::Random(m, k);
  kvplan::RowMatrix w = kvplan::RowMatrix::Random(n, k);
  kvplan::RowMatrix y(m, n);
  double best = 0;
  for (int rep = 0; rep < 7; ++rep) {
    const auto start = Clock::now();
    y.noalias() = x * w.transpose();
    const double s = seconds_since(start);
    best = std::max(best, 2.0 * static_cast<double>(m * k * n) / s / 1e9);
  }
  if (!std::isfinite(y(0, 0))) std::printf("(unexpected non-finite GEMM result)\n");
  return best;
}

// Bytes per second of memcpy over buffers far larger than the caches, best of a few.
double memcpy_gbs() {
  constexpr size_t kBytes = size_t{256} << 20;
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = Clock::now();
    std::memcpy(b.data(), a.data(), kBytes);
    best = std::max(best, static_cast<double>(kBytes) / seconds_since(start) / 1e9);
  }
  if (b[kBytes / 2] != 1) std::printf("(unexpected memcpy result)\n");
  return best;
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

uint64_t matrix_bytes(const kvplan::ModelWeights& w) {
  uint64_t n = w.token_embd.stored_bytes() + w.output.stored_bytes();
  for (const kvplan::LayerWeights& L : w.layers) {
    n += L.wqkv.stored_bytes() + L.wo.stored_bytes() + L.w_gate_up.stored_bytes() +
         L.w_down.stored_bytes();
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path = kvplan::test::smollm2_path().string();
  std::string kv;
  int threads = 2, ctx = 256, decode = 64, repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model")
      model_path = argv[i + 1];
    else if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--ctx")
      ctx = std::atoi(argv[i + 1]);
    else if (a == "--decode")
      decode = std::atoi(argv[i + 1]);
    else if (a == "--repeats")
      repeats = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--kv")
      kv = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    kvplan::set_compute_threads(threads);
    auto start = Clock::now();
    const kvplan::ModelWeights weights = kvplan::load_model_weights(model_path);
    const double weight_mib = static_cast<double>(matrix_bytes(weights)) / (1024.0 * 1024.0);
    std::printf(
        "model       %s: mapped in %.2f s (%.1fM parameters, matrices %.1f MiB as stored)\n",
        model_path.c_str(), seconds_since(start), static_cast<double>(weights.n_parameters()) / 1e6,
        weight_mib);
    const kvplan::Transformer model(weights);
    const kvplan::ModelConfig& c = weights.config;
    kvplan::KvCacheOptions kv_options = kvplan::KvCacheOptions::exact_kv();
    if (!kv.empty()) {
      kv_options = kvplan::KvCacheOptions::uniform(kvplan::KvPair::parse(kv), c.n_layers, {});
    }
    std::vector<int32_t> tokens(static_cast<size_t>(ctx));
    for (int i = 0; i < ctx; ++i) tokens[static_cast<size_t>(i)] = (i * 7919 + 13) % c.vocab_size;

    double best_prefill = 1e30;
    for (int rep = 0; rep < repeats; ++rep) {
      kvplan::KvCache cache(c, kv_options);
      start = Clock::now();
      const kvplan::RowMatrix logits = model.forward(tokens, cache);
      best_prefill = std::min(best_prefill, seconds_since(start));
    }
    kvplan::KvCache cache(c, kv_options);
    (void)model.forward(tokens, cache, nullptr, {.last_logits_only = true});
    double decode_flops = 0;
    start = Clock::now();
    int32_t next = tokens.back();
    for (int i = 0; i < decode; ++i) {
      decode_flops += model.chunk_flops(cache.layer(0).n_tokens(), 1, false);
      const int32_t one[1] = {next};
      const kvplan::RowMatrix logits =
          model.forward(one, cache, nullptr, {.last_logits_only = true});
      Eigen::Index best = 0;
      logits.row(0).maxCoeff(&best);
      next = static_cast<int32_t>(best);
    }
    const double decode_s = seconds_since(start);
    // Measured before the references below allocate their own matrices.
    const double peak_mib = peak_rss_mib();
    const double gemm = eigen_gemm_gflops(ctx, c.hidden_size, c.ffn_size * 2);
    std::printf("eigen gemm  [%d x %d] x [%d x %d]^T: %.1f GFLOP/s on %d threads\n", ctx,
                c.hidden_size, c.ffn_size * 2, c.hidden_size, gemm, kvplan::compute_threads());

    const double prefill_flops = model.chunk_flops(0, static_cast<size_t>(ctx));
    const double prefill_gflops = prefill_flops / best_prefill / 1e9;
    std::printf(
        "prefill     %d tokens: %.0f tokens/s, %.1f GFLOP/s = %.0f%% of the GEMM rate "
        "(KV %s)\n",
        ctx, ctx / best_prefill, prefill_gflops, 100 * prefill_gflops / gemm,
        kv_options.describe().c_str());

    const double weight_bytes = static_cast<double>(matrix_bytes(weights));
    const double copy_gbs = memcpy_gbs();
    const double decode_gbs = weight_bytes * decode / decode_s / 1e9;
    std::printf("memcpy      %.1f GB/s (one thread, 256 MiB buffers)\n", copy_gbs);
    std::printf(
        "decode      %d tokens after %d: %.1f tokens/s, %.1f GFLOP/s, %.1f GB/s of stored "
        "weights streamed = %.0f%% of memcpy\n",
        decode, ctx, decode / decode_s, decode_flops / decode_s / 1e9, decode_gbs,
        100 * decode_gbs / copy_gbs);
    std::printf("memory      peak RSS %.0f MiB = %.2f x the matrices as stored\n", peak_mib,
                peak_mib / weight_mib);
  } catch (const kvplan::Error& e) {
    std::fprintf(stderr, "kvplan_bench_forward: %s\n", e.what());
    return e.code() == kvplan::ErrorCode::kNotFound ? 0 : 1;
  }
  return 0;
}
