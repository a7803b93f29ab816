#include "serve/kv_bench.h"

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "core/error.h"
#include "core/system_memory.h"
#include "formats/kv_bytes.h"
#include "model/greedy.h"

namespace kvplan::serve {
namespace {

constexpr size_t kChunk = 512;

KvMemoryRow fill_and_measure(const ModelConfig& config, const KvCacheOptions& options,
                             int64_t tokens) {
  // Free heap memory still resident from before (model loading) would take the first pages and
  // hide them from the reading: hand it back to the kernel first.
  ::malloc_trim(0);
  const std::optional<uint64_t> before = resident_memory_bytes();
  KvCache cache(config, options);
  size_t width = 0;
  for (int l = 0; l < config.n_layers; ++l) {
    width = std::max(width,
                     static_cast<size_t>(cache.layer(l).n_kv_heads() * cache.layer(l).head_dim()));
  }
  // Random rows (never zeros: some formats pack zeros specially), one chunk reused for every
  // chunk of every layer; freed before the second reading.
  std::vector<float> rows(kChunk * width);
  {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& x : rows) x = dist(rng);
  }
  for (int64_t t = 0; t < tokens; t += static_cast<int64_t>(kChunk)) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(kChunk, tokens - t));
    for (int l = 0; l < config.n_layers; ++l) {
      LayerKvCache& layer = cache.layer(l);
      const size_t layer_width = static_cast<size_t>(layer.n_kv_heads() * layer.head_dim());
      layer.append(rows.data(), rows.data(), n, layer_width);
      layer.commit();
    }
  }
  std::vector<float>().swap(rows);
  const std::optional<uint64_t> after = resident_memory_bytes();
  if (!before || !after) fail(ErrorCode::kInternal, "resident memory is unreadable (/proc)");
  KvMemoryRow row;
  row.tokens = tokens;
  row.held_bytes = cache.bytes_held();
  row.resident_bytes = *after > *before ? *after - *before : 0;
  return row;
}

}  // namespace

KvMemoryRow measure_kv_memory(const ModelConfig& config, const KvCacheOptions& options,
                              int64_t tokens) {
  const KvGeometry geometry = kv_geometry(config);
  const std::vector<KvPair> pairs =
      options.exact
          ? std::vector<KvPair>(static_cast<size_t>(config.n_layers), KvPair::parse("f32/f32"))
          : options.config(geometry);
  const QuantSettings settings = options.exact ? QuantSettings{} : options.settings;
  int fds[2];
  if (::pipe(fds) != 0) fail(ErrorCode::kInternal, "bench kv: pipe() failed");
  const pid_t child = ::fork();
  if (child < 0) fail(ErrorCode::kInternal, "bench kv: fork() failed");
  if (child == 0) {
    ::close(fds[0]);
    int status = 0;
    KvMemoryRow row;
    try {
      row = fill_and_measure(config, options, tokens);
    } catch (...) {
      status = 1;
    }
    const ssize_t written = ::write(fds[1], &row, sizeof row);
    ::_exit(written == static_cast<ssize_t>(sizeof row) ? status : 1);
  }
  ::close(fds[1]);
  KvMemoryRow row;
  const ssize_t got = ::read(fds[0], &row, sizeof row);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (got != static_cast<ssize_t>(sizeof row) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail(ErrorCode::kInternal, "bench kv: the memory measurement of {} tokens failed", tokens);
  }
  row.estimate_bytes = kv_cache_bytes(geometry, pairs, settings, tokens, 1);
  return row;
}

KvSpeedRow measure_kv_speed(const Transformer& model, const KvCacheOptions& options,
                            std::span<const int32_t> prompt, int64_t decode_tokens) {
  if (prompt.empty()) fail(ErrorCode::kInvalidArgument, "bench kv: an empty prompt");
  KvCache cache(model.config(), options);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  RowMatrix logits;
  for (size_t t = 0; t < prompt.size(); t += kChunk) {
    const size_t n = std::min(kChunk, prompt.size() - t);
    logits = model.forward(prompt.subspan(t, n), cache, nullptr, {.last_logits_only = true});
  }
  const auto prefilled = Clock::now();
  for (int64_t i = 0; i < decode_tokens; ++i) {
    const int32_t one[1] = {greedy_token(logits.row(0))};
    logits = model.forward(one, cache, nullptr, {.last_logits_only = true});
  }
  const auto end = Clock::now();
  KvSpeedRow row;
  row.prompt_tokens = static_cast<int64_t>(prompt.size());
  row.decode_tokens = decode_tokens;
  row.prefill_tokens_per_s =
      static_cast<double>(prompt.size()) / std::chrono::duration<double>(prefilled - start).count();
  row.decode_tokens_per_s = decode_tokens > 0
                                ? static_cast<double>(decode_tokens) /
                                      std::chrono::duration<double>(end - prefilled).count()
                                : 0;
  return row;
}

}  // namespace kvplan::serve
