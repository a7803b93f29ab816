// kvplan verify: checks that a plan's KV pages survive the runtime byte-exact — through the device
// pool, the pinned host tier and the disk tier — that no copy strays outside its page, that
// attention over pages loaded back from the host equals attention over the device originals, and
// (separately) how far the plan's quantization moves K, V and attention from exact KV.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/json_text.h"
#include "model/model_config.h"
#include "plan/plan.h"
#include "runtime/offload_runtime.h"

namespace kvplan::cli {
namespace {

struct VerifyOptions {
  std::string plan_path;
  std::string model;
  int64_t chunk_tokens = 0;  // 0: max(block_size, 64) rounded to a block multiple
  uint64_t seed = 1;
  bool json = false;
};

// One chunk's exact KV ([layer][page][K|V] -> [block, heads, dim] floats) and its packed image.
struct ChunkData {
  std::vector<std::vector<float>> exact;  // index (layer * pages + page) * 2 + side
  std::vector<std::byte> image;
};

size_t exact_index(const PlanLayout& l, int layer, size_t page, KvSide side) {
  return (static_cast<size_t>(layer) * l.pages_per_chunk() + page) * 2 + static_cast<size_t>(side);
}

ChunkData make_chunk(const PlanLayout& layout, std::mt19937_64& rng) {
  ChunkData c;
  c.image.resize(layout.chunk_bytes());
  c.exact.resize(static_cast<size_t>(layout.n_layers()) * layout.pages_per_chunk() * 2);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int l = 0; l < layout.n_layers(); ++l) {
    for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
      for (KvSide s : {KvSide::kKey, KvSide::kValue}) {
        std::byte* dst = c.image.data() + layout.page_offset(l, p, s);
        const size_t bytes = layout.page_bytes(l, s);
        if (layout.layer(l).pair.is_slot()) {  // opaque: random bytes
          for (size_t i = 0; i < bytes; ++i) dst[i] = static_cast<std::byte>(rng());
          continue;
        }
        std::vector<float>& v = c.exact[exact_index(layout, l, p, s)];
        v.resize(layout.page_values(l));
        for (float& x : v) x = normal(rng);
        layout.pack_page(l, s, v, {reinterpret_cast<uint8_t*>(dst), bytes});
      }
    }
  }
  return c;
}

// Per-layer byte mismatches between two chunk images.
std::vector<uint64_t> layer_mismatches(const PlanLayout& layout, const std::vector<std::byte>& a,
                                       const std::vector<std::byte>& b) {
  std::vector<uint64_t> bad(layout.n_layers(), 0);
  for (int l = 0; l < layout.n_layers(); ++l) {
    for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
      for (KvSide s : {KvSide::kKey, KvSide::kValue}) {
        const size_t off = layout.page_offset(l, p, s);
        for (size_t i = 0; i < layout.page_bytes(l, s); ++i) bad[l] += a[off + i] != b[off + i];
      }
    }
  }
  return bad;
}

// K or V of a whole chunk for one layer as [tokens, heads, dim], from packed pages of `image`
// (or the exact values when image is null).
std::vector<float> layer_values(const PlanLayout& layout, const ChunkData& c,
                                const std::vector<std::byte>* image, int l, KvSide s) {
  std::vector<float> out;
  const size_t per_page = layout.page_values(l);
  out.resize(per_page * layout.pages_per_chunk());
  for (size_t p = 0; p < layout.pages_per_chunk(); ++p) {
    float* dst = out.data() + p * per_page;
    if (image == nullptr) {
      const auto& v = c.exact[exact_index(layout, l, p, s)];
      std::copy(v.begin(), v.end(), dst);
    } else {
      layout.unpack_page(
          l, s,
          {reinterpret_cast<const uint8_t*>(image->data()) + layout.page_offset(l, p, s),
           layout.page_bytes(l, s)},
          {dst, per_page});
    }
  }
  return out;
}

// Naive f64 attention of `q` [n_q_heads, dim] over K, V [tokens, kv_heads, dim] (GQA: query head
// h reads KV head h * kv_heads / n_q_heads). Returns [n_q_heads, dim].
std::vector<double> attend(const std::vector<float>& q, const std::vector<float>& k,
                           const std::vector<float>& v, int n_q_heads, int kv_heads, int dim) {
  const size_t tokens = k.size() / (static_cast<size_t>(kv_heads) * dim);
  std::vector<double> out(static_cast<size_t>(n_q_heads) * dim, 0.0);
  std::vector<double> score(tokens);
  for (int h = 0; h < n_q_heads; ++h) {
    const int kh = h * kv_heads / n_q_heads;
    double mx = -1e300;
    for (size_t t = 0; t < tokens; ++t) {
      double s = 0;
      for (int d = 0; d < dim; ++d) {
        s += double(q[h * dim + d]) * k[(t * kv_heads + kh) * dim + d];
      }
      score[t] = s / std::sqrt(double(dim));
      mx = std::max(mx, score[t]);
    }
    double sum = 0;
    for (double& s : score) sum += (s = std::exp(s - mx));
    for (size_t t = 0; t < tokens; ++t) {
      for (int d = 0; d < dim; ++d) {
        out[h * dim + d] += score[t] / sum * v[(t * kv_heads + kh) * dim + d];
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

void run_verify(const VerifyOptions& o) {
  const Plan plan = read_plan(o.plan_path);
  if (!o.model.empty()) {
    const ModelConfig config = load_model_config(o.model, config_dir() / "models");
    KvGeometry g;
    g.model_name = config.name;
    for (int l = 0; l < config.n_layers; ++l) {
      g.layers.push_back({config.n_kv_heads[l], config.head_dim, config.sliding_window[l]});
    }
    check_plan_matches(plan, g, config.source);
  }
  const size_t block = plan.quantization.block_size;
  size_t chunk_tokens = static_cast<size_t>(o.chunk_tokens);
  if (o.chunk_tokens < 0) {
    fail(ErrorCode::kInvalidArgument, "--chunk-tokens {}: expected > 0", o.chunk_tokens);
  }
  if (chunk_tokens == 0) chunk_tokens = (std::max<size_t>(block, 64) + block - 1) / block * block;

  const PlanLayout layout(plan, {.chunk_tokens = chunk_tokens});
  const std::filesystem::path disk =
      std::filesystem::temp_directory_path() / ("kvplan_verify_" + std::to_string(::getpid()));
  std::filesystem::remove_all(disk);
  RuntimeOptions ro;
  ro.chunk_tokens = chunk_tokens;
  ro.device_capacity_bytes = 2 * layout.chunk_bytes();
  ro.host_capacity_bytes = 1 * stored_chunk_bytes(layout);  // a second store spills the first
  ro.disk_dir = disk;
  ro.disk_capacity_bytes = 4 * stored_chunk_bytes(layout);
  ro.disk_fsync = false;
  nlohmann::json out;
  bool ok = true;
  {
    OffloadRuntime rt(plan, ro);
    std::mt19937_64 rng(o.seed);
    std::vector<uint32_t> tokens(2 * chunk_tokens);
    for (auto& t : tokens) t = static_cast<uint32_t>(rng() % 32000);
    const std::vector<uint64_t> keys = rt.keys(tokens);
    std::vector<ChunkData> chunks;
    std::vector<std::byte> back(layout.chunk_bytes());
    std::vector<uint64_t> device_bad(layout.n_layers(), 0), host_bad(layout.n_layers(), 0),
        disk_bad(layout.n_layers(), 0);
    auto add = [&](std::vector<uint64_t>& total, const std::vector<uint64_t>& more) {
      for (size_t l = 0; l < total.size(); ++l) total[l] += more[l];
    };
    auto require = [](bool cond, const std::string& what) {
      if (!cond) fail(ErrorCode::kInternal, "verify: {}", what);
    };

    // Device pool: write, read back; then store to the host tier.
    for (size_t i = 0; i < 2; ++i) {
      chunks.push_back(make_chunk(layout, rng));
      const DeviceChunk c = rt.acquire_device(keys[i]);
      rt.write_device(c, 0, chunks[i].image);
      rt.read_device(c, 0, back);
      add(device_bad, layer_mismatches(layout, chunks[i].image, back));
      const TransferStatus s = rt.store(c).get();
      require(s.ok, "store failed: " + s.message);
      rt.release(c);
    }
    rt.flush();
    // Chunk 0 was spilled to disk by chunk 1's store; chunk 1 is on the host tier.
    const LookupResult where = rt.lookup(tokens);
    require(where.prefix_chunks == 2, "lookup did not find both stored chunks");
    for (uint64_t k : keys) (void)rt.evict_from(k, Tier::kDevice);
    const LoadResult loaded = rt.load(tokens).get();
    require(loaded.status.ok && loaded.chunks.size() == 2, "load: " + loaded.status.message);
    std::vector<std::vector<std::byte>> loaded_images;
    for (size_t i = 0; i < 2; ++i) {
      rt.read_device(loaded.chunks[i], 0, back);
      add(where.locations[i] == Tier::kDisk ? disk_bad : host_bad,
          layer_mismatches(layout, chunks[i].image, back));
      loaded_images.push_back(back);
      rt.release(loaded.chunks[i]);
    }
    const uint64_t guards = rt.count_guard_violations();
    const RuntimeStats st = rt.stats();

    // Attention: device original vs loaded back (must be identical), and exact vs quantized.
    nlohmann::json layers = nlohmann::json::array();
    const int n_q_heads = std::max(plan.model.num_attention_heads, 1);
    for (int l = 0; l < layout.n_layers(); ++l) {
      const LayerPageGeometry& g = layout.layer(l);
      nlohmann::json j = {{"layer", l},
                          {"group", g.transfer_group},
                          {"pair", g.pair.name()},
                          {"page_bytes", g.page_bytes()},
                          {"device_mismatches", device_bad[l]},
                          {"host_mismatches", host_bad[l]},
                          {"disk_mismatches", disk_bad[l]}};
      ok = ok && device_bad[l] == 0 && host_bad[l] == 0 && disk_bad[l] == 0;
      if (!g.pair.is_slot()) {
        const int qh = std::max(n_q_heads, g.n_kv_heads);
        std::vector<float> q(static_cast<size_t>(qh) * g.head_dim);
        std::normal_distribution<float> normal(0.f, 1.f);
        for (float& x : q) x = normal(rng);
        double attn_diff = 0, e_k = 0, e_v = 0, e_o = 0;
        for (size_t i = 0; i < 2; ++i) {
          const auto k_dev = layer_values(layout, chunks[i], &chunks[i].image, l, KvSide::kKey);
          const auto v_dev = layer_values(layout, chunks[i], &chunks[i].image, l, KvSide::kValue);
          const auto k_back = layer_values(layout, chunks[i], &loaded_images[i], l, KvSide::kKey);
          const auto v_back = layer_values(layout, chunks[i], &loaded_images[i], l, KvSide::kValue);
          const auto k_ex = layer_values(layout, chunks[i], nullptr, l, KvSide::kKey);
          const auto v_ex = layer_values(layout, chunks[i], nullptr, l, KvSide::kValue);
          const auto o_dev = attend(q, k_dev, v_dev, qh, g.n_kv_heads, g.head_dim);
          const auto o_back = attend(q, k_back, v_back, qh, g.n_kv_heads, g.head_dim);
          const auto o_ex = attend(q, k_ex, v_ex, qh, g.n_kv_heads, g.head_dim);
          for (size_t x = 0; x < o_dev.size(); ++x) {
            attn_diff = std::max(attn_diff, std::fabs(o_dev[x] - o_back[x]));
          }
          e_k = std::max(e_k, relative_error(k_ex, k_dev));
          e_v = std::max(e_v, relative_error(v_ex, v_dev));
          e_o = std::max(e_o, relative_error(o_ex, o_dev));
        }
        ok = ok && attn_diff == 0.0;
        j["attention_device_vs_host_max_abs_diff"] = attn_diff;
        j["quality"] = {
            {"key_rel_error", e_k}, {"value_rel_error", e_v}, {"attention_rel_error", e_o}};
      }
      layers.push_back(j);
    }
    ok = ok && guards == 0 && st.refusals == 0;
    out = {{"plan", o.plan_path},
           {"chunk_tokens", chunk_tokens},
           {"chunk_bytes", layout.chunk_bytes()},
           {"transfer_groups", layout.groups().size()},
           {"backend", std::string(rt.backend().name())},
           {"tiers_checked", {"device", "host", "disk"}},
           {"guard_violations", guards},
           {"refusals", st.refusals},
           {"ok", ok},
           {"layers", layers}};
  }
  std::filesystem::remove_all(disk);

  if (o.json) {
    std::printf("%s\n", json_text(out, 2).c_str());
  } else {
    std::printf("plan      %s\n", o.plan_path.c_str());
    std::printf("layout    %zu-token chunks of %s in %zu transfer groups; backend %s\n",
                chunk_tokens, format_bytes(static_cast<double>(layout.chunk_bytes())).c_str(),
                layout.groups().size(), out["backend"].get<std::string>().c_str());
    std::printf("\nround trip, guards and attention (must be exact):\n");
    std::printf("%5s %5s %-16s %9s %9s %9s %14s\n", "layer", "group", "pair", "device", "host",
                "disk", "attn diff");
    for (const auto& j : out["layers"]) {
      std::printf(
          "%5d %5d %-16s %9llu %9llu %9llu %14s\n", j["layer"].get<int>(), j["group"].get<int>(),
          j["pair"].get<std::string>().c_str(),
          (unsigned long long)j["device_mismatches"].get<uint64_t>(),
          (unsigned long long)j["host_mismatches"].get<uint64_t>(),
          (unsigned long long)j["disk_mismatches"].get<uint64_t>(),
          j.contains("attention_device_vs_host_max_abs_diff")
              ? fmt::format("{:g}", j["attention_device_vs_host_max_abs_diff"].get<double>())
                    .c_str()
              : "opaque slot");
    }
    std::printf("guard bytes changed: %llu; objects refused: %llu\n",
                (unsigned long long)out["guard_violations"].get<uint64_t>(),
                (unsigned long long)out["refusals"].get<uint64_t>());
    std::printf("\nquantization quality vs exact KV (relative RMS error, random N(0,1) KV):\n");
    std::printf("%5s %-16s %10s %10s %10s\n", "layer", "pair", "K", "V", "attention");
    for (const auto& j : out["layers"]) {
      if (!j.contains("quality")) continue;
      std::printf("%5d %-16s %10.3g %10.3g %10.3g\n", j["layer"].get<int>(),
                  j["pair"].get<std::string>().c_str(), j["quality"]["key_rel_error"].get<double>(),
                  j["quality"]["value_rel_error"].get<double>(),
                  j["quality"]["attention_rel_error"].get<double>());
    }
    std::printf("\n%s\n", ok ? "OK: every byte came back through every tier"
                             : "FAILED: see the non-zero counts above");
  }
  if (!ok) fail(ErrorCode::kInternal, "verify failed for {}", o.plan_path);
}

}  // namespace

void register_verify_command(CLI::App& app) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Check a plan's KV pages through the runtime's device, host and disk tiers");
  cmd->footer(
      "Examples:\n"
      "  kvplan verify --plan configs/plans/minimax-m2.5-slot134.json\n"
      "  kvplan verify --plan plan.json --model SmolLM2-135M --json\n"
      "Exit codes: 0 all exact, 1 a mismatch or failure, 2 bad input (plan, model, options).");
  cmd->add_option("--plan", o->plan_path, "The plan.json to verify")->required();
  cmd->add_option("--model", o->model,
                  "Check the plan against this model (config.json, .gguf or preset name)");
  cmd->add_option("--chunk-tokens", o->chunk_tokens,
                  "Tokens per cached chunk (a multiple of the plan's block_size)");
  cmd->add_option("--seed", o->seed, "Seed of the random KV");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_verify(*o); });
}

}  // namespace kvplan::cli
