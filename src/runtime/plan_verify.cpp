#include "runtime/plan_verify.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <system_error>

#include "core/error.h"
#include "runtime/stored_object.h"

namespace kvplan {
namespace {

// A fresh directory for the runtime's disk tier, removed with everything in it however the check
// ends (a failed check throws).
class ScratchDir {
 public:
  explicit ScratchDir(const std::filesystem::path& parent) {
    std::random_device entropy;
    path_ = (parent.empty() ? std::filesystem::temp_directory_path() : parent) /
            fmt::format("kvplan_verify_{}_{:08x}", ::getpid(), entropy());
    std::error_code ec;
    std::filesystem::create_directories(path_, ec);
    if (ec) {
      fail(ErrorCode::kIo, "verify: cannot create scratch directory {}: {}", path_.string(),
           ec.message());
    }
  }
  ~ScratchDir() {
    std::error_code ignored;  // best effort: a destructor must not throw over the check's error
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// One chunk's exact KV ([layer][page][K|V] -> [block, heads, dim] floats) and its packed image.
struct ChunkData {
  std::vector<std::vector<float>> exact;  // index (layer * pages + page) * 2 + side
  std::vector<std::byte> image;
};

size_t exact_index(const PlanLayout& l, int layer, size_t page, KvSide side) {
  return (static_cast<size_t>(layer) * l.pages_per_chunk() + page) * 2 + static_cast<size_t>(side);
}

// Copies a head run's heads between a layer's page values [block, heads, dim] and the run's own
// [block, run heads, dim]: `to_run` gathers, otherwise scatters back.
void copy_run_heads(const LayerPageGeometry& g, const PageRun& r, size_t block, float* layer_values,
                    float* run_values, bool to_run) {
  const size_t dim = static_cast<size_t>(g.head_dim);
  const size_t run_width = static_cast<size_t>(r.n_kv_heads) * dim;
  for (size_t t = 0; t < block; ++t) {
    float* layer_row =
        layer_values +
        (t * static_cast<size_t>(g.n_kv_heads) + static_cast<size_t>(r.first_head)) * dim;
    float* run_row = run_values + t * run_width;
    if (to_run) {
      std::copy(layer_row, layer_row + run_width, run_row);
    } else {
      std::copy(run_row, run_row + run_width, layer_row);
    }
  }
}

bool holds_slots(const LayerPageGeometry& g) {
  return std::any_of(g.runs.begin(), g.runs.end(),
                     [](const PageRun& r) { return r.pair.is_slot(); });
}

ChunkData make_chunk(const PlanLayout& layout, std::mt19937_64& rng) {
  ChunkData c;
  c.image.resize(layout.chunk_bytes());
  c.exact.resize(static_cast<size_t>(layout.n_layers()) * layout.pages_per_chunk() * 2);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> run_values;
  for (int l = 0; l < layout.n_layers(); ++l) {
    const LayerPageGeometry& g = layout.layer(l);
    for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
      for (KvSide s : {KvSide::kKey, KvSide::kValue}) {
        // A layer with opaque slot pages has no values to attend over: it keeps no exact KV.
        std::vector<float>& v = c.exact[exact_index(layout, l, p, s)];
        if (!holds_slots(g)) {
          v.resize(layout.block_size() * static_cast<size_t>(g.n_kv_heads) *
                   static_cast<size_t>(g.head_dim));
          for (float& x : v) x = normal(rng);
        }
        for (const PageRun& r : g.runs) {
          std::byte* dst = c.image.data() + layout.page_offset(l, p, s, r.run);
          const size_t bytes = layout.page_bytes(l, s, r.run);
          if (r.pair.is_slot()) {  // opaque: random bytes
            for (size_t i = 0; i < bytes; ++i) dst[i] = static_cast<std::byte>(rng());
            continue;
          }
          run_values.resize(layout.page_values(l, r.run));
          if (v.empty()) {
            for (float& x : run_values) x = normal(rng);
          } else {
            copy_run_heads(g, r, layout.block_size(), v.data(), run_values.data(), true);
          }
          layout.pack_page(l, s, run_values, {reinterpret_cast<uint8_t*>(dst), bytes}, r.run);
        }
      }
    }
  }
  return c;
}

// Adds the byte mismatches between two chunk images to `bad` ([layer]).
void add_layer_mismatches(const PlanLayout& layout, const std::vector<std::byte>& a,
                          const std::vector<std::byte>& b, std::vector<uint64_t>& bad) {
  for (const LayerPageGeometry& g : layout.layers()) {
    for (const PageRun& r : g.runs) {
      for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
        for (KvSide s : {KvSide::kKey, KvSide::kValue}) {
          const size_t off = layout.page_offset(g.layer, p, s, r.run);
          for (size_t i = 0; i < layout.page_bytes(g.layer, s, r.run); ++i) {
            bad[static_cast<size_t>(g.layer)] += a[off + i] != b[off + i];
          }
        }
      }
    }
  }
}

// K or V of a whole chunk for one layer as [tokens, heads, dim], from packed pages of `image`
// (every head run's) or the exact values when image is null.
std::vector<float> layer_values(const PlanLayout& layout, const ChunkData& c,
                                const std::vector<std::byte>* image, int l, KvSide s) {
  const LayerPageGeometry& g = layout.layer(l);
  const size_t per_page =
      layout.block_size() * static_cast<size_t>(g.n_kv_heads) * static_cast<size_t>(g.head_dim);
  std::vector<float> out(per_page * layout.pages_per_chunk());
  std::vector<float> run_values;
  for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
    float* dst = out.data() + p * per_page;
    if (image == nullptr) {
      const auto& v = c.exact[exact_index(layout, l, p, s)];
      std::copy(v.begin(), v.end(), dst);
      continue;
    }
    for (const PageRun& r : g.runs) {
      run_values.resize(layout.page_values(l, r.run));
      layout.unpack_page(
          l, s,
          {reinterpret_cast<const uint8_t*>(image->data()) + layout.page_offset(l, p, s, r.run),
           layout.page_bytes(l, s, r.run)},
          run_values, r.run);
      copy_run_heads(g, r, layout.block_size(), dst, run_values.data(), false);
    }
  }
  return out;
}

// A layer's pair, or its head runs' pairs ("q8_0/q4_0 x2, q4_0/q4_0") in a per-head layer.
std::string layer_pair_text(const LayerPageGeometry& g) {
  if (!g.per_head()) return g.runs.front().pair.name();
  std::string text;
  for (const PageRun& r : g.runs) {
    if (!text.empty()) text += ", ";
    text += r.pair.name();
    if (r.n_kv_heads > 1) text += fmt::format(" x{}", r.n_kv_heads);
  }
  return text;
}

// Naive f64 attention of `q` [n_q_heads, dim] over K, V [tokens, kv_heads, dim] (GQA: query head
// h reads KV head h * kv_heads / n_q_heads). Returns [n_q_heads, dim].
std::vector<double> attend(const std::vector<float>& q, const std::vector<float>& k,
                           const std::vector<float>& v, int n_q_heads, int kv_heads, int dim) {
  const size_t d_n = static_cast<size_t>(dim);
  const size_t kv_n = static_cast<size_t>(kv_heads);
  const size_t tokens = k.size() / (kv_n * d_n);
  std::vector<double> out(static_cast<size_t>(n_q_heads) * d_n, 0.0);
  std::vector<double> score(tokens);
  for (size_t h = 0; h < static_cast<size_t>(n_q_heads); ++h) {
    const size_t kh = h * kv_n / static_cast<size_t>(n_q_heads);
    double mx = -1e300;
    for (size_t t = 0; t < tokens; ++t) {
      double s = 0;
      for (size_t d = 0; d < d_n; ++d) s += double(q[h * d_n + d]) * k[(t * kv_n + kh) * d_n + d];
      score[t] = s / std::sqrt(double(dim));
      mx = std::max(mx, score[t]);
    }
    double sum = 0;
    for (double& s : score) sum += (s = std::exp(s - mx));
    for (size_t t = 0; t < tokens; ++t) {
      for (size_t d = 0; d < d_n; ++d) {
        out[h * d_n + d] += score[t] / sum * v[(t * kv_n + kh) * d_n + d];
      }
    }
  }
  return out;
}

template <typename A, typename B>
double relative_error(const A& ref, const B& got) {
  double e = 0, r = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    e += (double(ref[i]) - double(got[i])) * (double(ref[i]) - double(got[i]));
    r += double(ref[i]) * double(ref[i]);
  }
  return r > 0 ? std::sqrt(e / r) : std::sqrt(e);
}

void require(bool cond, std::string_view what) {
  if (!cond) fail(ErrorCode::kInternal, "verify: {}", what);
}

size_t tier_index(Tier t) {
  switch (t) {
    case Tier::kDevice:
      return 0;
    case Tier::kHost:
      return 1;
    case Tier::kDisk:
      return 2;
    case Tier::kMiss:
      break;
  }
  fail(ErrorCode::kInternal, "verify: no tier check for '{}'", tier_name(t));
}

constexpr size_t kChunks = 2;

}  // namespace

const TierCheck& PlanVerifyResult::tier(Tier t) const {
  return tiers[tier_index(t)];
}

std::vector<std::string> PlanVerifyResult::tiers_checked() const {
  std::vector<std::string> names;
  for (Tier t : {Tier::kDevice, Tier::kHost, Tier::kDisk}) {
    if (tier(t).chunks > 0) names.emplace_back(tier_name(t));
  }
  return names;
}

PlanVerifyResult verify_plan(const Plan& plan, const PlanVerifyOptions& o) {
  const size_t block = plan.quantization.block_size;
  const size_t chunk_tokens = o.chunk_tokens > 0
                                  ? o.chunk_tokens
                                  : (std::max<size_t>(block, 64) + block - 1) / block * block;
  const PlanLayout layout(plan, {.chunk_tokens = chunk_tokens});
  const ScratchDir scratch(o.scratch_parent);
  RuntimeOptions ro;
  ro.chunk_tokens = chunk_tokens;
  ro.device_capacity_bytes = kChunks * layout.chunk_bytes();
  ro.host_capacity_bytes = 1 * stored_chunk_bytes(layout);  // a second store spills the first
  ro.disk_dir = scratch.path();
  ro.disk_capacity_bytes = 4 * stored_chunk_bytes(layout);
  ro.disk_fsync = false;

  PlanVerifyResult r;
  r.chunk_tokens = chunk_tokens;
  r.chunk_bytes = layout.chunk_bytes();
  r.transfer_groups = layout.groups().size();
  const size_t n_layers = static_cast<size_t>(layout.n_layers());
  std::vector<uint64_t> device_bad(n_layers, 0), host_bad(n_layers, 0), disk_bad(n_layers, 0);
  auto bad_of = [&](Tier t) -> std::vector<uint64_t>& {
    return t == Tier::kDisk ? disk_bad : t == Tier::kHost ? host_bad : device_bad;
  };

  OffloadRuntime rt(plan, ro);
  r.backend = std::string(rt.backend().name());
  std::mt19937_64 rng(o.seed);
  std::vector<uint32_t> tokens(kChunks * chunk_tokens);
  for (auto& t : tokens) t = static_cast<uint32_t>(rng() % 32000);
  const std::vector<uint64_t> keys = rt.keys(tokens);
  std::vector<ChunkData> chunks;
  for (size_t i = 0; i < kChunks; ++i) chunks.push_back(make_chunk(layout, rng));

  // Device pool: write, read back; then store to the host tier. Chunk 1 goes first so that chunk
  // 0's store spills it to disk: the load then takes chunk 0 from the host and chunk 1 from disk,
  // and a refused disk chunk (which ends the loaded prefix) cannot hide the host tier's result.
  std::vector<std::byte> back(layout.chunk_bytes());
  TierCheck& device = r.tiers[tier_index(Tier::kDevice)];
  for (size_t i : {size_t{1}, size_t{0}}) {
    const DeviceChunk c = rt.acquire_device(keys[i]);
    rt.write_device(c, 0, chunks[i].image);
    rt.read_device(c, 0, back);
    add_layer_mismatches(layout, chunks[i].image, back, device_bad);
    ++device.chunks;
    device.bytes_compared += back.size();
    const TransferStatus s = rt.store(c).get();
    require(s.ok, "store failed: " + s.message);
    rt.release(c);
  }
  rt.flush();
  // Device copies go first, so the lookup reports the tier each chunk will really be loaded from.
  for (size_t i = 0; i < kChunks; ++i) {
    require(rt.evict_from(keys[i], Tier::kDevice),
            fmt::format("chunk {} could not be evicted from the device", i));
  }
  const LookupResult where = rt.lookup(tokens);
  require(where.prefix_chunks == kChunks && where.locations[0] == Tier::kHost &&
              where.locations[1] == Tier::kDisk,
          fmt::format("after the stores chunk 0 should be on the host tier and chunk 1 on disk; "
                      "lookup found {} and {}",
                      tier_name(where.locations[0]), tier_name(where.locations[1])));
  if (o.before_reload) o.before_reload(rt, keys);

  const uint64_t disk_read_before = rt.stats().bytes_from_disk;
  const LoadResult loaded = rt.load(tokens).get();
  require(loaded.status.ok || loaded.status.refusal != RefusalReason::kNone,
          "load failed: " + loaded.status.message);
  const size_t n_loaded = loaded.chunks.size();
  require(n_loaded == kChunks || !loaded.status.ok,
          fmt::format("load brought back {} of {} chunks", n_loaded, kChunks));
  std::vector<std::vector<std::byte>> loaded_images;
  for (size_t i = 0; i < n_loaded; ++i) {
    TierCheck& t = r.tiers[tier_index(where.locations[i])];
    rt.read_device(loaded.chunks[i], 0, back);
    std::vector<uint64_t> bad(n_layers, 0);
    add_layer_mismatches(layout, chunks[i].image, back, bad);
    for (size_t l = 0; l < n_layers; ++l) {
      bad_of(where.locations[i])[l] += bad[l];
      t.mismatches += bad[l];
    }
    ++t.chunks;
    t.bytes_compared += back.size();
    loaded_images.push_back(back);
    rt.release(loaded.chunks[i]);
  }
  if (!loaded.status.ok) {  // the refused chunk ended the prefix
    TierCheck& t = r.tiers[tier_index(where.locations[n_loaded])];
    ++t.chunks;
    ++t.refusals;
  }
  r.guard_violations = rt.count_guard_violations();
  const RuntimeStats st = rt.stats();
  r.refusals = st.refusals;
  r.disk_bytes_read = st.bytes_from_disk - disk_read_before;
  // The chunk credited to the disk tier must really have been read from disk.
  const TierCheck& disk = r.tier(Tier::kDisk);
  require(disk.refusals > 0 || r.disk_bytes_read == disk.chunks * stored_chunk_bytes(layout),
          fmt::format("{} chunk(s) came back from the disk tier but the runtime read {} bytes "
                      "from disk, expected {} per chunk",
                      disk.chunks, r.disk_bytes_read, stored_chunk_bytes(layout)));

  // Attention: device original vs reloaded (must be identical), and exact vs quantized.
  bool ok = true;
  const int n_q_heads = std::max(plan.model.n_attention_heads, 1);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int l = 0; l < layout.n_layers(); ++l) {
    const LayerPageGeometry& g = layout.layer(l);
    const size_t li = static_cast<size_t>(l);
    LayerVerify v;
    v.layer = l;
    v.group = g.runs.front().transfer_group;
    v.pair = layer_pair_text(g);
    v.page_bytes = g.page_bytes();
    v.device_mismatches = device_bad[li];
    v.host_mismatches = host_bad[li];
    v.disk_mismatches = disk_bad[li];
    if (!holds_slots(g)) {
      const int qh = std::max(n_q_heads, g.n_kv_heads);
      std::vector<float> q(static_cast<size_t>(qh) * static_cast<size_t>(g.head_dim));
      for (float& x : q) x = normal(rng);
      double attn_diff = 0;
      for (size_t i = 0; i < kChunks; ++i) {
        const ChunkData& c = chunks[i];
        const auto k_dev = layer_values(layout, c, &c.image, l, KvSide::kKey);
        const auto v_dev = layer_values(layout, c, &c.image, l, KvSide::kValue);
        const auto k_ex = layer_values(layout, c, nullptr, l, KvSide::kKey);
        const auto v_ex = layer_values(layout, c, nullptr, l, KvSide::kValue);
        const auto o_dev = attend(q, k_dev, v_dev, qh, g.n_kv_heads, g.head_dim);
        const auto o_ex = attend(q, k_ex, v_ex, qh, g.n_kv_heads, g.head_dim);
        v.key_rel_error = std::max(v.key_rel_error, relative_error(k_ex, k_dev));
        v.value_rel_error = std::max(v.value_rel_error, relative_error(v_ex, v_dev));
        v.attention_rel_error = std::max(v.attention_rel_error, relative_error(o_ex, o_dev));
        if (i >= loaded_images.size()) continue;  // refused: nothing came back to attend over
        const auto k_back = layer_values(layout, c, &loaded_images[i], l, KvSide::kKey);
        const auto v_back = layer_values(layout, c, &loaded_images[i], l, KvSide::kValue);
        const auto o_back = attend(q, k_back, v_back, qh, g.n_kv_heads, g.head_dim);
        for (size_t x = 0; x < o_dev.size(); ++x) {
          attn_diff = std::max(attn_diff, std::fabs(o_dev[x] - o_back[x]));
        }
      }
      v.attention_device_vs_reloaded_max_abs_diff = attn_diff;
      ok = ok && attn_diff == 0.0;
    }
    r.layers.push_back(std::move(v));
  }
  for (const TierCheck& t : r.tiers)
    ok = ok && t.chunks > 0 && t.mismatches == 0 && t.refusals == 0;
  r.ok = ok && r.guard_violations == 0 && r.refusals == 0;
  return r;
}

}  // namespace kvplan
