#include "serve/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace kvplan::serve {
namespace {

std::vector<uint32_t> token_ids(std::span<const int32_t> tokens) {
  return {tokens.begin(), tokens.end()};
}

// Tokens every layer of the cache holds committed (packed into pages).
size_t committed_tokens(const KvCache& cache) {
  size_t n = SIZE_MAX;
  for (int l = 0; l < cache.n_layers(); ++l) n = std::min(n, cache.layer(l).n_committed());
  return cache.n_layers() == 0 ? 0 : n;
}

RuntimeOptions checked(const Plan& plan, RuntimeOptions options) {
  const QuantSettings& s = plan.quantization;
  for (const PlanLayer& l : plan.layers) {
    const std::vector<KvPair> heads = l.per_head() ? l.heads : std::vector<KvPair>{l.pair};
    const bool kivi = std::any_of(heads.begin(), heads.end(),
                                  [&](const KvPair& p) { return layer_runs_kivi(p, s); });
    if (kivi && options.chunk_tokens % s.residual_length != 0) {
      fail(ErrorCode::kInvalidArgument,
           "chunk_tokens {}: layer {} runs KIVI, whose residual window of {} tokens must divide "
           "a stored chunk",
           options.chunk_tokens, l.index, s.residual_length);
    }
  }
  return options;
}

}  // namespace

KvCacheOptions cache_options(const Plan& plan) {
  KvCacheOptions o =
      KvCacheOptions::of_config(plan.kv_config(), plan.model.geometry, plan.quantization);
  o.fp8_scales = plan.fp8_scales();
  return o;
}

PrefixCache::PrefixCache(const Plan& plan, RuntimeOptions options)
    : runtime_(plan, checked(plan, std::move(options))) {}

PrefixRestore PrefixCache::restore(std::span<const int32_t> tokens, KvCache& cache) {
  PrefixRestore r;
  if (tokens.empty()) return r;
  const std::vector<uint32_t> ids = token_ids(tokens);
  const LookupResult found = runtime_.lookup(ids);
  const size_t chunk = chunk_tokens();
  const size_t most = (tokens.size() - 1) / chunk;
  if (found.prefix_chunks == 0 || most == 0) return r;
  LoadResult loaded = runtime_.load(ids, std::min(most, found.prefix_chunks)).get();
  r.status = loaded.status;
  const PlanLayout& layout = runtime_.layout();
  const size_t n = loaded.chunks.size() * chunk;
  for (int l = 0; l < cache.n_layers(); ++l) cache.layer(l).adopt_committed(n);
  for (size_t c = 0; c < loaded.chunks.size(); ++c) {
    const DeviceChunk& d = loaded.chunks[c];
    for (int l = 0; l < cache.n_layers(); ++l) {
      LayerKvCache& layer = cache.layer(l);
      for (int run = 0; run < layer.n_head_runs(); ++run) {
        for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
          for (const KvSide side : {KvSide::kKey, KvSide::kValue}) {
            runtime_.read_device(d, layout.page_offset(l, p, side, run),
                                 {reinterpret_cast<std::byte*>(
                                      layer.page(run, side, c * layout.pages_per_chunk() + p)),
                                  layout.page_bytes(l, side, run)});
          }
        }
      }
    }
    r.tiers.push_back(found.locations[c]);
  }
  for (const DeviceChunk& d : loaded.chunks) runtime_.release(d);
  r.tokens = n;
  return r;
}

size_t PrefixCache::store(std::span<const int32_t> tokens, const KvCache& cache,
                          size_t first_chunk) {
  const size_t chunk = chunk_tokens();
  const size_t chunks = std::min(committed_tokens(cache), tokens.size()) / chunk;
  if (chunks == 0) return 0;
  const std::vector<uint32_t> ids = token_ids(tokens.first(chunks * chunk));
  const std::vector<uint64_t> keys = runtime_.keys(ids);
  const PlanLayout& layout = runtime_.layout();
  size_t stored = 0;
  for (size_t c = first_chunk; c < chunks; ++c) {
    const size_t first_page = c * layout.pages_per_chunk();
    for (int l = 0; l < cache.n_layers(); ++l) {
      if (!cache.layer(l).holds_page(first_page)) return stored;  // behind a sliding window
    }
    // nullopt: the device holds the chunk already (restored or stored before), or no slot is
    // free; either way there is nothing to store now.
    const std::optional<DeviceChunk> d = runtime_.try_acquire_device(keys[c]);
    if (!d) continue;
    for (int l = 0; l < cache.n_layers(); ++l) {
      const LayerKvCache& layer = cache.layer(l);
      for (int run = 0; run < layer.n_head_runs(); ++run) {
        for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
          for (const KvSide side : {KvSide::kKey, KvSide::kValue}) {
            runtime_.write_device(*d, layout.page_offset(l, p, side, run),
                                  {reinterpret_cast<const std::byte*>(
                                       layer.page(run, side, c * layout.pages_per_chunk() + p)),
                                   layout.page_bytes(l, side, run)});
          }
        }
      }
    }
    // One chunk at a time: a small device pool may hold only this one.
    stored += runtime_.store(*d).get().ok ? 1 : 0;
    runtime_.release(*d);
  }
  return stored;
}

RowMatrix PrefixCache::prefill_storing(const Transformer& model, std::span<const int32_t> tokens,
                                       size_t from, KvCache& cache) {
  const size_t chunk = chunk_tokens();
  RowMatrix logits;
  for (size_t t = from; t < tokens.size();) {
    const size_t end = std::min(tokens.size(), (t / chunk + 1) * chunk);
    logits = model.forward(tokens.subspan(t, end - t), cache, nullptr, {.last_logits_only = true});
    if (end % chunk == 0) (void)store(tokens.first(end), cache, end / chunk - 1);
    t = end;
  }
  return logits;
}

RowMatrix prefill_aligned(const Transformer& model, std::span<const int32_t> tokens, size_t from,
                          KvCache& cache, size_t chunk_tokens) {
  if (from >= tokens.size()) {
    fail(ErrorCode::kInvalidArgument, "prefill from token {} of {}: nothing to compute", from,
         tokens.size());
  }
  RowMatrix logits;
  for (size_t t = from; t < tokens.size();) {
    const size_t end = std::min(tokens.size(), (t / chunk_tokens + 1) * chunk_tokens);
    logits = model.forward(tokens.subspan(t, end - t), cache, nullptr, {.last_logits_only = true});
    t = end;
  }
  return logits;
}

}  // namespace kvplan::serve
