// kvplan bench kernels: GB/s of the KV kernels (pack, unpack, decode attention) beside the device
// copy bandwidth measured in the same run. Without a GPU it says so and times the kernels' CPU
// reference paths (single-threaded) beside memcpy instead, labelled as such.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/device_option.h"
#include "core/error.h"
#include "core/json_text.h"
#include "formats/format.h"
#include "formats/format_size.h"
#include "gpu/device_buffer.h"
#include "gpu/gpu_error.h"
#include "kernels/gpu_runtime.h"
#include "kernels/kv_kernels.h"
#include "kernels/kv_reference.h"

namespace kvplan::cli {
namespace {

struct BenchKernelOptions {
  std::string device = "auto";
  std::string formats = "f16,q8_0,q4_0,int8,int4,fp8_e4m3";
  std::string tokens = "32K";
  int64_t n_tokens = 32768;
  int batch = 8;
  int kv_heads = 8;
  int heads = 32;
  int head_dim = 128;
  int group = 32;
  int page_size = 16;
  int iters = 5;
  bool json = false;
};

struct BenchRow {
  std::string format;
  double pack_gbps = 0, unpack_gbps = 0, decode_gbps = 0;
};

void check(const gpu::Status& s) {
  check_gpu(s, "bench kernels");
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<uint16_t> random_f16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = f32_to_f16(normal(rng));
  return v;
}

// Best of `iters` runs of `work`, in seconds, timed with device events (after one warm-up).
double time_gpu(int iters, const std::function<void()>& work) {
  gpu::Event start = nullptr, stop = nullptr;
  check(gpu::event_create(&start));
  check(gpu::event_create(&stop));
  work();
  check(gpu::stream_synchronize(nullptr));
  float best = 1e30f;
  for (int i = 0; i < iters; ++i) {
    check(gpu::event_record(start, nullptr));
    work();
    check(gpu::event_record(stop, nullptr));
    float ms = 0;
    check(gpu::event_elapsed_ms(start, stop, &ms));
    best = std::min(best, ms);
  }
  check(gpu::event_destroy(start));
  check(gpu::event_destroy(stop));
  return best * 1e-3;
}

double time_cpu(int iters, const std::function<void()>& work) {
  work();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    work();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Shapes shared by both paths: one pool holding `batch` sequences of `tokens` tokens back to back,
// packed as a single sequence and read as `batch` (no page table: pages in order).
struct BenchShape {
  int64_t n_tokens_total = 0;  // tokens * batch
  size_t n_values = 0;         // n_tokens_total * kv_heads * head_dim
  int64_t pages_per_seq = 0;
};

BenchShape shape_of(const BenchKernelOptions& o) {
  if (o.n_tokens % o.page_size != 0)
    fail(ErrorCode::kInvalidArgument, "--tokens: must be a multiple of the page size ({})",
         o.page_size);
  BenchShape s;
  s.n_tokens_total = o.n_tokens * o.batch;
  s.n_values = static_cast<size_t>(s.n_tokens_total) * o.kv_heads * o.head_dim;
  s.pages_per_seq = o.n_tokens / o.page_size;
  return s;
}

struct KernelArgs {
  gpu::PackPageParams pack_k, pack_v;
  gpu::UnpackPageParams unpack;
  gpu::DecodeAttentionParams decode;
  size_t page_bytes_total = 0;
};

KernelArgs kernel_args(const BenchKernelOptions& o, const BenchShape& s, const RowFormat& f,
                       void* input, uint8_t* k_pages, uint8_t* v_pages, float* unpacked, float* q,
                       const int32_t* seq_lens, float* workspace, float* out) {
  KernelArgs a;
  const PagedKvView whole_k{k_pages,    nullptr,     o.page_size,
                            o.kv_heads, f.row_bytes, s.pages_per_seq * o.batch};
  PagedKvView whole_v = whole_k;
  whole_v.pages = v_pages;
  a.pack_k.src = dense_view(input, DenseType::kF16, s.n_tokens_total, o.kv_heads, o.head_dim);
  a.pack_k.dst = whole_k;
  a.pack_k.format = f;
  a.pack_v = a.pack_k;
  a.pack_v.dst = whole_v;
  a.unpack.src = whole_k;
  a.unpack.format = f;
  a.unpack.n_tokens = s.n_tokens_total;
  a.unpack.dst = unpacked;
  gpu::DecodeAttentionParams& d = a.decode;
  d.q = q;
  d.k = whole_k;
  d.v = whole_v;
  d.k.page_table_stride = d.v.page_table_stride = s.pages_per_seq;
  d.k_format = d.v_format = f;
  d.seq_lens = seq_lens;
  d.batch = o.batch;
  d.n_heads = o.heads;
  d.n_kv_heads = o.kv_heads;
  d.head_dim = o.head_dim;
  d.max_seq_len = o.n_tokens;
  d.sm_scale = 1.0f / std::sqrt(static_cast<float>(o.head_dim));
  d.workspace = workspace;
  d.out = out;
  a.page_bytes_total = static_cast<size_t>(s.n_tokens_total) * o.kv_heads * f.row_bytes;
  return a;
}

int decode_splits(const BenchKernelOptions& o) {
  return gpu::decode_attention_default_splits(o.batch, o.kv_heads, o.n_tokens);
}

double gbps(double bytes, double seconds) {
  return bytes / seconds / 1e9;
}

double run_gpu(const BenchKernelOptions& o, const std::vector<Format>& formats,
               std::vector<BenchRow>* rows) {
  const BenchShape s = shape_of(o);
  const size_t in_bytes = s.n_values * sizeof(uint16_t);
  const gpu::DeviceBuffer input_buf(in_bytes, "bench kernels: input");
  const gpu::DeviceBuffer copy_buf(in_bytes, "bench kernels: copy");
  const gpu::DeviceBuffer unpacked_buf(s.n_values * sizeof(float), "bench kernels: unpacked");
  auto* input = input_buf.as<uint16_t>();
  auto* copy = copy_buf.as<uint16_t>();
  auto* unpacked = unpacked_buf.as<float>();
  // Fill the input with a 1 Mi-value random pattern, repeated on the device.
  const size_t chunk = std::min<size_t>(s.n_values, size_t{1} << 20);
  const std::vector<uint16_t> pattern = random_f16(chunk, 1);
  for (size_t off = 0; off < s.n_values; off += chunk) {
    check(gpu::copy_to_device(input + off, pattern.data(),
                              std::min(chunk, s.n_values - off) * sizeof(uint16_t), nullptr));
  }
  const std::vector<uint16_t> q_h =
      random_f16(static_cast<size_t>(o.batch) * o.heads * o.head_dim, 2);
  std::vector<float> q_f(q_h.size());
  for (size_t i = 0; i < q_h.size(); ++i) q_f[i] = f16_to_f32(q_h[i]);
  const gpu::DeviceBuffer q_buf(q_f.size() * sizeof(float), "bench kernels: queries");
  auto* q = q_buf.as<float>();
  check(gpu::copy_to_device(q, q_f.data(), q_f.size() * sizeof(float), nullptr));
  const std::vector<int32_t> lens(static_cast<size_t>(o.batch), static_cast<int32_t>(o.n_tokens));
  const gpu::DeviceBuffer lens_buf(lens.size() * sizeof(int32_t), "bench kernels: lengths");
  auto* seq_lens = lens_buf.as<int32_t>();
  check(gpu::copy_to_device(seq_lens, lens.data(), lens.size() * sizeof(int32_t), nullptr));
  const int n_splits = decode_splits(o);
  const gpu::DeviceBuffer workspace_buf(
      gpu::decode_attention_workspace_bytes(o.batch, o.heads, o.head_dim, n_splits),
      "bench kernels: decode workspace");
  const gpu::DeviceBuffer out_buf(q_f.size() * sizeof(float), "bench kernels: outputs");
  auto* workspace = workspace_buf.as<float>();
  auto* out = out_buf.as<float>();
  check(gpu::stream_synchronize(nullptr));

  const double copy_s =
      time_gpu(o.iters, [&] { check(gpu::copy_device_to_device(copy, input, in_bytes, nullptr)); });
  const double copy_gbps = gbps(2.0 * static_cast<double>(in_bytes), copy_s);
  for (const Format& fmt : formats) {
    const RowFormat f = kernel_row_format(fmt, o.head_dim, o.group, "--formats");
    const size_t page_bytes = static_cast<size_t>(s.n_tokens_total) * o.kv_heads * f.row_bytes;
    const gpu::DeviceBuffer k_buf(page_bytes, "bench kernels: key pages");
    const gpu::DeviceBuffer v_buf(page_bytes, "bench kernels: value pages");
    auto* k_pages = k_buf.as<uint8_t>();
    auto* v_pages = v_buf.as<uint8_t>();
    const KernelArgs a =
        kernel_args(o, s, f, input, k_pages, v_pages, unpacked, q, seq_lens, workspace, out);
    BenchRow row{fmt.name()};
    const double pack_s = time_gpu(o.iters, [&] { check(gpu::pack_page(a.pack_k, nullptr)); });
    check(gpu::pack_page(a.pack_v, nullptr));
    const double unpack_s = time_gpu(o.iters, [&] { check(gpu::unpack_page(a.unpack, nullptr)); });
    const double decode_s =
        time_gpu(o.iters, [&] { check(gpu::decode_attention(a.decode, nullptr)); });
    row.pack_gbps = gbps(static_cast<double>(in_bytes + page_bytes), pack_s);
    row.unpack_gbps = gbps(static_cast<double>(page_bytes + s.n_values * sizeof(float)), unpack_s);
    row.decode_gbps = gbps(2.0 * static_cast<double>(page_bytes), decode_s);
    rows->push_back(row);
  }
  return copy_gbps;
}

double run_cpu_reference(const BenchKernelOptions& o, const std::vector<Format>& formats,
                         std::vector<BenchRow>* rows) {
  const BenchShape s = shape_of(o);
  const size_t in_bytes = s.n_values * sizeof(uint16_t);
  std::vector<uint16_t> input = random_f16(s.n_values, 1), copy(s.n_values);
  std::vector<float> unpacked(s.n_values);
  const std::vector<uint16_t> q_h =
      random_f16(static_cast<size_t>(o.batch) * o.heads * o.head_dim, 2);
  std::vector<float> q(q_h.size()), out(q_h.size());
  for (size_t i = 0; i < q_h.size(); ++i) q[i] = f16_to_f32(q_h[i]);
  const std::vector<int32_t> lens(static_cast<size_t>(o.batch), static_cast<int32_t>(o.n_tokens));
  std::vector<float> workspace(
      gpu::decode_attention_workspace_bytes(o.batch, o.heads, o.head_dim, decode_splits(o)) /
      sizeof(float));
  const double copy_s =
      time_cpu(o.iters, [&] { std::memcpy(copy.data(), input.data(), in_bytes); });
  const double copy_gbps = gbps(2.0 * static_cast<double>(in_bytes), copy_s);
  for (const Format& fmt : formats) {
    const RowFormat f = kernel_row_format(fmt, o.head_dim, o.group, "--formats");
    const size_t page_bytes = static_cast<size_t>(s.n_tokens_total) * o.kv_heads * f.row_bytes;
    std::vector<uint8_t> k_pages(page_bytes), v_pages(page_bytes);
    const KernelArgs a =
        kernel_args(o, s, f, input.data(), k_pages.data(), v_pages.data(), unpacked.data(),
                    q.data(), lens.data(), workspace.data(), out.data());
    BenchRow row{fmt.name()};
    const double pack_s = time_cpu(o.iters, [&] { check(gpu::ref::pack_page(a.pack_k)); });
    check(gpu::ref::pack_page(a.pack_v));
    const double unpack_s = time_cpu(o.iters, [&] { check(gpu::ref::unpack_page(a.unpack)); });
    const double decode_s = time_cpu(o.iters, [&] { check(gpu::ref::decode_attention(a.decode)); });
    row.pack_gbps = gbps(static_cast<double>(in_bytes + page_bytes), pack_s);
    row.unpack_gbps = gbps(static_cast<double>(page_bytes + s.n_values * sizeof(float)), unpack_s);
    row.decode_gbps = gbps(2.0 * static_cast<double>(page_bytes), decode_s);
    rows->push_back(row);
  }
  return copy_gbps;
}

void run_bench_kernels(BenchKernelOptions o, bool sizes_given) {
  o.n_tokens = parse_token_count(o.tokens, "--tokens");
  if (o.n_tokens <= 0 || o.batch <= 0 || o.kv_heads <= 0 || o.heads <= 0 || o.head_dim <= 0 ||
      o.iters <= 0 || o.group <= 0) {
    fail(ErrorCode::kInvalidArgument,
         "--tokens, --batch, --kv-heads, --heads, --head-dim, --group, --iters must be > 0");
  }
  if (o.heads % o.kv_heads != 0)
    fail(ErrorCode::kInvalidArgument, "--heads ({}) must be a multiple of --kv-heads ({})", o.heads,
         o.kv_heads);
  std::vector<Format> formats;
  for (const std::string& name : split_list(o.formats)) formats.push_back(Format::parse(name));
  if (formats.empty()) fail(ErrorCode::kInvalidArgument, "--formats: empty list");
  const DeviceChoice device = resolve_device_option(o.device);
  std::string backend, note;
  if (!device.use_gpu && !sizes_given) {
    // The reference paths are single-threaded loops; keep the default run short.
    o.n_tokens = 4096;
    o.batch = 1;
    note = "sizes reduced for the CPU reference (give --tokens/--batch to override)";
  }
  std::vector<BenchRow> rows;
  double copy_gbps = 0;
  if (device.use_gpu) {
    backend = "gpu";
    copy_gbps = run_gpu(o, formats, &rows);
  } else {
    backend = "cpu-reference";
    copy_gbps = run_cpu_reference(o, formats, &rows);
  }
  const char* copy_label = device.use_gpu ? "device copy" : "memcpy";
  if (o.json) {
    nlohmann::json j;
    j["device"] = device.description;
    j["backend"] = backend;
    j["shape"] = {{"tokens", o.n_tokens},     {"batch", o.batch},
                  {"kv_heads", o.kv_heads},   {"heads", o.heads},
                  {"head_dim", o.head_dim},   {"group", o.group},
                  {"page_size", o.page_size}, {"decode_splits", decode_splits(o)}};
    j["copy_gbps"] = copy_gbps;
    j["copy_kind"] = copy_label;
    for (const BenchRow& r : rows) {
      j["formats"].push_back({{"format", r.format},
                              {"pack_gbps", r.pack_gbps},
                              {"unpack_gbps", r.unpack_gbps},
                              {"decode_gbps", r.decode_gbps},
                              {"pack_vs_copy", r.pack_gbps / copy_gbps},
                              {"unpack_vs_copy", r.unpack_gbps / copy_gbps},
                              {"decode_vs_copy", r.decode_gbps / copy_gbps}});
    }
    if (!note.empty()) j["note"] = note;
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  std::printf("kernel bench on %s\n", device.description.c_str());
  if (!device.use_gpu) {
    std::printf(
        "NO GPU: timing the kernels' CPU reference paths (single-threaded) beside memcpy;\n"
        "these are not GPU numbers.\n");
  }
  if (!note.empty()) std::printf("(%s)\n", note.c_str());
  std::printf(
      "shape: %lld tokens x batch %d, %d KV heads (%d query heads) x head_dim %d, page %d\n",
      static_cast<long long>(o.n_tokens), o.batch, o.kv_heads, o.heads, o.head_dim, o.page_size);
  std::printf("%s: %.1f GB/s (bytes read + written)\n\n", copy_label, copy_gbps);
  std::printf("%-10s %12s %7s %12s %7s %12s %7s\n", "format", "pack GB/s", "%copy", "unpack GB/s",
              "%copy", "decode GB/s", "%copy");
  for (const BenchRow& r : rows) {
    std::printf("%-10s %12.1f %6.0f%% %12.1f %6.0f%% %12.1f %6.0f%%\n", r.format.c_str(),
                r.pack_gbps, 100 * r.pack_gbps / copy_gbps, r.unpack_gbps,
                100 * r.unpack_gbps / copy_gbps, r.decode_gbps, 100 * r.decode_gbps / copy_gbps);
  }
  std::printf(
      "\npack: f16 in + packed out; unpack: packed in + f32 out; decode: packed K+V read.\n");
}

}  // namespace

void register_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure kvplan's kernels and KV configurations");
  bench->require_subcommand(1);
  register_bench_kv_command(bench);
  register_bench_serve_command(bench);
  auto o = std::make_shared<BenchKernelOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "kernels", "Pack / unpack / decode-attention GB/s beside the copy bandwidth of the same run");
  cmd->footer(
      "Example: kvplan bench kernels --device gpu --tokens 32K --batch 8 --formats q8_0,q4_0\n"
      "Without a GPU the kernels' CPU reference paths are timed beside memcpy, and say so.");
  add_device_option(cmd, &o->device);
  cmd->add_option("--formats", o->formats, "Comma-separated formats (K and V use the same)")
      ->capture_default_str();
  auto* tokens =
      cmd->add_option("--tokens", o->tokens, "Tokens per sequence: 32768, 32K, ... (default 32K)");
  auto* batch = cmd->add_option("--batch", o->batch, "Sequences (default 8)");
  cmd->add_option("--kv-heads", o->kv_heads, "KV heads")->capture_default_str();
  cmd->add_option("--heads", o->heads, "Query heads (GQA group = heads / kv-heads)")
      ->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim, "Head dimension")->capture_default_str();
  cmd->add_option("--group", o->group, "int8/int4/int2 group size")->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed runs per kernel (best is reported)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->callback(
      [o, tokens, batch] { run_bench_kernels(*o, tokens->count() > 0 || batch->count() > 0); });
}

}  // namespace kvplan::cli
