// Test scenarios of the KV kernels, run either by the CPU reference paths (src/kernels/kv_reference.h)
// or by the GPU launchers (src/kernels/kv_kernels.h) on the same fresh random inputs, and checked the
// same way: packed bytes against src/formats, unpacked values bit for bit, attention against an
// f64 reference. Outputs are poisoned (0xA5 bytes / NaN) before each run and checked fully
// written; every GPU call's Status is checked.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gpu_runtime.h"
#include "kernels/kv_kernels.h"
#include "kernels/kv_reference.h"
#include "kv_test_util.h"

namespace kvplan::test {

#define KVPLAN_EXPECT_OK(expr)                                                                  \
  do {                                                                                          \
    const ::kvplan::gpu::Status kvplan_s_ = (expr);                                             \
    ASSERT_TRUE(kvplan_s_.ok()) << #expr << ": " << kvplan_s_.call << ": " << kvplan_s_.message \
                                << " (" << kvplan_s_.api_error << ")";                          \
  } while (0)

// Device buffers freed on scope exit (a failed free is reported, not ignored).
class DeviceArena {
 public:
  ~DeviceArena() {
    for (void* p : ptrs_) {
      const gpu::Status s = gpu::free_device(p);
      EXPECT_TRUE(s.ok()) << "free_device: " << s.message;
    }
  }
  template <class T>
  T* upload(const std::vector<T>& v) {
    T* p = alloc<T>(v.size());
    if (p) check(gpu::copy_to_device(p, v.data(), v.size() * sizeof(T), nullptr));
    return p;
  }
  template <class T>
  T* alloc(size_t n) {
    void* p = nullptr;
    if (!check(gpu::malloc_device(&p, std::max<size_t>(n, 1) * sizeof(T)))) return nullptr;
    ptrs_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> download(const T* p, size_t n) {
    std::vector<T> v(n);
    check(gpu::stream_synchronize(nullptr));
    check(gpu::copy_to_host(v.data(), p, n * sizeof(T), nullptr));
    check(gpu::stream_synchronize(nullptr));
    return v;
  }
  bool check(const gpu::Status& s) {
    EXPECT_TRUE(s.ok()) << s.call << ": " << s.message << " (" << s.api_error << ")";
    return s.ok();
  }

 private:
  std::vector<void*> ptrs_;
};

// The row sizes each format is checked at: 32, 64, 128 and 192, those it packs (the whole-row
// rotations need a power of two, the *_had64 spans whole spans of 64); at least two of them.
inline std::vector<int> pack_test_head_dims(const Format& f) {
  std::vector<int> out;
  RowFormat r;
  for (const int d : {32, 64, 128, 192}) {
    if (make_row_format(static_cast<uint16_t>(f.id()), d, 32, &r)) out.push_back(d);
  }
  EXPECT_GE(out.size(), 2u) << f.name();
  return out;
}

inline constexpr uint8_t kPoisonByte = 0xA5;

struct PackCase {
  Format format;
  int head_dim = 128, n_kv_heads = 3, group = 32;
  DenseType type = DenseType::kF32;
  int64_t n_tokens = 37, first_token = 5, page_size = 16;
  uint32_t seed = 1;
};

inline std::string describe(const PackCase& c) {
  return c.format.name() + " D=" + std::to_string(c.head_dim) +
         " group=" + std::to_string(c.group) + " input=" + std::to_string(static_cast<int>(c.type));
}

// Packs with the reference or the GPU, then unpacks what was packed, and checks both against
// src/formats: bytes identical, values bit-identical, no byte outside the written rows touched.
inline void check_pack_unpack(const PackCase& c, bool on_gpu) {
  SCOPED_TRACE(describe(c) + (on_gpu ? " [gpu]" : " [cpu reference]"));
  const RowFormat f = row_format(c.format, c.head_dim, c.group);
  const int H = c.n_kv_heads, D = c.head_dim;
  const int batch = 2, seq = 1;
  const PagePool pool = make_page_pool(batch, c.first_token + c.n_tokens, c.page_size, c.seed);
  const size_t n_values = static_cast<size_t>(c.n_tokens) * H * D;
  std::vector<float> values = random_values(n_values, c.seed);
  std::vector<uint16_t> narrow;
  if (c.type != DenseType::kF32) {
    narrow = to_narrow(values, c.type);
    values = narrow_to_f32(narrow, c.type);  // what the kernel sees
  }
  std::vector<float> fp8_scales(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h)
    fp8_scales[static_cast<size_t>(h)] = 0.01f * static_cast<float>(h + 1);
  const bool fp8 = c.format.has_tensor_scale();

  PagedKvView view{nullptr, pool.table.data(), c.page_size, H, f.row_bytes, pool.pages_per_seq};
  const size_t pool_bytes = static_cast<size_t>(pool.n_pages() * view.page_bytes());
  std::vector<uint8_t> pages(pool_bytes, kPoisonByte);
  std::vector<float> unpacked(n_values, std::numeric_limits<float>::quiet_NaN());

  gpu::PackPageParams pp;
  pp.dst = view;
  pp.format = f;
  pp.seq = seq;
  pp.first_token = c.first_token;
  gpu::UnpackPageParams up;
  up.format = f;
  up.seq = seq;
  up.first_token = c.first_token;
  up.n_tokens = c.n_tokens;
  if (!on_gpu) {
    pp.src =
        dense_view(c.type == DenseType::kF32 ? static_cast<void*>(values.data()) : narrow.data(),
                   c.type, c.n_tokens, H, D);
    pp.dst.pages = pages.data();
    pp.fp8_scales = fp8 ? fp8_scales.data() : nullptr;
    KVPLAN_EXPECT_OK(gpu::ref::pack_page(pp));
    up.src = pp.dst;
    up.fp8_scales = pp.fp8_scales;
    up.dst = unpacked.data();
    KVPLAN_EXPECT_OK(gpu::ref::unpack_page(up));
  } else {
    DeviceArena mem;
    void* src = c.type == DenseType::kF32 ? static_cast<void*>(mem.upload(values))
                                          : static_cast<void*>(mem.upload(narrow));
    pp.src = dense_view(src, c.type, c.n_tokens, H, D);
    pp.dst.pages = mem.upload(pages);
    pp.dst.page_table = mem.upload(pool.table);
    pp.fp8_scales = fp8 ? mem.upload(fp8_scales) : nullptr;
    float* d_unpacked = mem.upload(unpacked);
    ASSERT_FALSE(::testing::Test::HasFailure());
    KVPLAN_EXPECT_OK(gpu::pack_page(pp, nullptr));
    up.src = pp.dst;
    up.fp8_scales = pp.fp8_scales;
    up.dst = d_unpacked;
    KVPLAN_EXPECT_OK(gpu::unpack_page(up, nullptr));
    KVPLAN_EXPECT_OK(gpu::stream_synchronize(nullptr));
    pages = mem.download(pp.dst.pages, pool_bytes);
    unpacked = mem.download(d_unpacked, n_values);
  }

  // Expected bytes and values: src/formats on the same f32 values, one row at a time.
  std::vector<uint8_t> expected(static_cast<size_t>(f.row_bytes));
  std::vector<float> expected_values(static_cast<size_t>(D));
  std::vector<bool> written(pool_bytes, false);
  int bad_rows = 0, bad_values = 0;
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    for (int h = 0; h < H; ++h) {
      PackOptions opt{static_cast<size_t>(c.group),
                      fp8 ? fp8_scales[static_cast<size_t>(h)] : 1.0f};
      const float* row = values.data() + (static_cast<size_t>(t) * H + h) * D;
      pack_row(c.format, std::span<const float>(row, static_cast<size_t>(D)), expected, opt);
      const int64_t off = view.row_offset(seq, c.first_token + t, h);
      if (std::memcmp(pages.data() + off, expected.data(), expected.size()) != 0) ++bad_rows;
      std::fill(written.begin() + off, written.begin() + off + f.row_bytes, true);
      unpack_row(c.format, expected, expected_values, opt);
      const float* got = unpacked.data() + (static_cast<size_t>(t) * H + h) * D;
      if (std::memcmp(got, expected_values.data(), sizeof(float) * D) != 0) ++bad_values;
    }
  }
  EXPECT_EQ(bad_rows, 0) << "packed rows differing from src/formats";
  EXPECT_EQ(bad_values, 0) << "unpacked rows differing from src/formats (NaN = not written)";
  size_t stray = 0;
  for (size_t i = 0; i < pool_bytes; ++i) stray += !written[i] && pages[i] != kPoisonByte;
  EXPECT_EQ(stray, 0u) << "bytes written outside the packed rows";
}

struct DecodeCase {
  Format k_format, v_format;
  int head_dim = 128, n_heads = 8, n_kv_heads = 2, group = 32;
  std::vector<int32_t> seq_lens{1, 100, 517};
  int64_t page_size = 16;
  int n_splits = 0;
  uint32_t seed = 7;
};

inline std::string describe(const DecodeCase& c) {
  return c.k_format.name() + "/" + c.v_format.name() + " D=" + std::to_string(c.head_dim) +
         " heads=" + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) +
         " splits=" + std::to_string(c.n_splits);
}

// Packs K/V with src/formats into shuffled pages, runs decode attention (reference or GPU), and
// compares every output with f64 attention over the values src/formats unpacks.
inline void check_decode(const DecodeCase& c, bool on_gpu) {
  SCOPED_TRACE(describe(c) + (on_gpu ? " [gpu]" : " [cpu reference]"));
  const int batch = static_cast<int>(c.seq_lens.size());
  const int H = c.n_kv_heads, D = c.head_dim;
  const int64_t max_len = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
  const RowFormat kf = row_format(c.k_format, D, c.group), vf = row_format(c.v_format, D, c.group);
  const PagePool pool = make_page_pool(batch, max_len, c.page_size, c.seed);
  PagedKvView kv{nullptr, pool.table.data(), c.page_size, H, kf.row_bytes, pool.pages_per_seq};
  PagedKvView vv{nullptr, pool.table.data(), c.page_size, H, vf.row_bytes, pool.pages_per_seq};
  std::vector<uint8_t> k_pages(static_cast<size_t>(pool.n_pages() * kv.page_bytes()), 0);
  std::vector<uint8_t> v_pages(static_cast<size_t>(pool.n_pages() * vv.page_bytes()), 0);
  std::vector<float> k_scales(static_cast<size_t>(H)), v_scales(static_cast<size_t>(H));
  for (int g = 0; g < H; ++g) {
    k_scales[static_cast<size_t>(g)] = fp8_scale_for_absmax(Format(FormatId::kFp8E4M3), 9.0f);
    v_scales[static_cast<size_t>(g)] = 0.002f * static_cast<float>(g + 1);
  }
  const bool k_fp8 = c.k_format.has_tensor_scale();
  const bool v_fp8 = c.v_format.has_tensor_scale();
  // Dequantized K/V per sequence: [max_len, H * D].
  std::vector<std::vector<float>> k_vals(static_cast<size_t>(batch)),
      v_vals(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    const int64_t len = c.seq_lens[static_cast<size_t>(b)];
    const std::vector<float> k = random_values(static_cast<size_t>(len) * H * D, c.seed + 11 * b);
    const std::vector<float> v =
        random_values(static_cast<size_t>(len) * H * D, c.seed + 13 * b + 1);
    k_vals[static_cast<size_t>(b)].resize(k.size());
    v_vals[static_cast<size_t>(b)].resize(v.size());
    for (int64_t t = 0; t < len; ++t) {
      for (int g = 0; g < H; ++g) {
        const size_t o = (static_cast<size_t>(t) * H + g) * D;
        const PackOptions ko{static_cast<size_t>(c.group),
                             k_fp8 ? k_scales[static_cast<size_t>(g)] : 1.0f};
        const PackOptions vo{static_cast<size_t>(c.group),
                             v_fp8 ? v_scales[static_cast<size_t>(g)] : 1.0f};
        std::span<uint8_t> kr(k_pages.data() + kv.row_offset(b, t, g),
                              static_cast<size_t>(kf.row_bytes));
        std::span<uint8_t> vr(v_pages.data() + vv.row_offset(b, t, g),
                              static_cast<size_t>(vf.row_bytes));
        pack_row(c.k_format, std::span<const float>(k.data() + o, static_cast<size_t>(D)), kr, ko);
        pack_row(c.v_format, std::span<const float>(v.data() + o, static_cast<size_t>(D)), vr, vo);
        unpack_row(
            c.k_format, kr,
            std::span<float>(k_vals[static_cast<size_t>(b)].data() + o, static_cast<size_t>(D)),
            ko);
        unpack_row(
            c.v_format, vr,
            std::span<float>(v_vals[static_cast<size_t>(b)].data() + o, static_cast<size_t>(D)),
            vo);
      }
    }
  }
  std::vector<float> q = random_values(static_cast<size_t>(batch) * c.n_heads * D, c.seed + 99);
  const size_t n_out = static_cast<size_t>(batch) * c.n_heads * D;
  std::vector<float> out(n_out, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> lse(static_cast<size_t>(batch) * c.n_heads,
                         std::numeric_limits<float>::quiet_NaN());

  gpu::DecodeAttentionParams p;
  p.k = kv;
  p.v = vv;
  p.k_format = kf;
  p.v_format = vf;
  p.batch = batch;
  p.n_heads = c.n_heads;
  p.n_kv_heads = H;
  p.head_dim = D;
  p.max_seq_len = max_len;
  p.sm_scale = 1.0f / std::sqrt(static_cast<float>(D));
  p.n_splits = c.n_splits;
  const int n_splits =
      c.n_splits > 0 ? c.n_splits : gpu::decode_attention_default_splits(batch, H, max_len);
  const size_t ws_floats =
      gpu::decode_attention_workspace_bytes(batch, c.n_heads, D, n_splits) / sizeof(float);
  std::vector<float> workspace(ws_floats, std::numeric_limits<float>::quiet_NaN());
  if (!on_gpu) {
    p.q = q.data();
    p.k.pages = k_pages.data();
    p.v.pages = v_pages.data();
    p.k_fp8_scales = k_fp8 ? k_scales.data() : nullptr;
    p.v_fp8_scales = v_fp8 ? v_scales.data() : nullptr;
    p.seq_lens = c.seq_lens.data();
    p.workspace = workspace.data();
    p.out = out.data();
    p.lse = lse.data();
    KVPLAN_EXPECT_OK(gpu::ref::decode_attention(p));
  } else {
    DeviceArena mem;
    p.q = mem.upload(q);
    p.k.pages = mem.upload(k_pages);
    p.v.pages = mem.upload(v_pages);
    p.k.page_table = p.v.page_table = mem.upload(pool.table);
    p.k_fp8_scales = k_fp8 ? mem.upload(k_scales) : nullptr;
    p.v_fp8_scales = v_fp8 ? mem.upload(v_scales) : nullptr;
    p.seq_lens = mem.upload(c.seq_lens);
    p.workspace = mem.upload(workspace);
    p.out = mem.upload(out);
    p.lse = mem.upload(lse);
    ASSERT_FALSE(::testing::Test::HasFailure());
    KVPLAN_EXPECT_OK(gpu::decode_attention(p, nullptr));
    KVPLAN_EXPECT_OK(gpu::stream_synchronize(nullptr));
    out = mem.download(p.out, n_out);
    lse = mem.download(p.lse, lse.size());
  }
  ASSERT_TRUE(all_finite(out)) << "output not fully written";
  ASSERT_TRUE(all_finite(lse)) << "lse not fully written";
  const int group = c.n_heads / H;
  double worst = 0;
  std::vector<double> ref;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < c.n_heads; ++h) {
      double ref_lse = 0;
      attention_f64(q.data() + (static_cast<size_t>(b) * c.n_heads + h) * D,
                    k_vals[static_cast<size_t>(b)], v_vals[static_cast<size_t>(b)], 0,
                    c.seq_lens[static_cast<size_t>(b)] - 1, static_cast<size_t>(H) * D,
                    static_cast<size_t>(h / group) * D, D, 1.0 / std::sqrt(static_cast<double>(D)),
                    &ref, &ref_lse);
      const size_t row = static_cast<size_t>(b) * c.n_heads + h;
      worst = std::max(worst, relative_error(out.data() + row * D, ref));
      EXPECT_NEAR(lse[row], ref_lse, 1e-3 * std::max(1.0, std::fabs(ref_lse)))
          << "b=" << b << " h=" << h;
    }
  }
  EXPECT_LE(worst, 1e-3) << "max relative error vs f64";
  std::printf("[   info   ] decode %s%s: max relative error vs f64 %.3g\n", describe(c).c_str(),
              on_gpu ? " [gpu]" : "", worst);
}

struct BatchedCase {
  Format k_format, v_format;
  int head_dim = 64, n_heads = 4, n_kv_heads = 2, group = 32;
  int64_t n_queries = 24, n_keys = 64, window = 0, page_size = 16;
  uint32_t seed = 21;
};

inline void check_batched(const BatchedCase& c, bool on_gpu) {
  SCOPED_TRACE(c.k_format.name() + "/" + c.v_format.name() + " window=" + std::to_string(c.window) +
               (on_gpu ? " [gpu]" : " [cpu reference]"));
  const int H = c.n_kv_heads, D = c.head_dim, group = c.n_heads / c.n_kv_heads;
  const RowFormat kf = row_format(c.k_format, D, c.group), vf = row_format(c.v_format, D, c.group);
  const PagePool pool = make_page_pool(1, c.n_keys, c.page_size, c.seed);
  PagedKvView kv{nullptr, pool.table.data(), c.page_size, H, kf.row_bytes, pool.pages_per_seq};
  PagedKvView vv{nullptr, pool.table.data(), c.page_size, H, vf.row_bytes, pool.pages_per_seq};
  std::vector<uint8_t> k_pages(static_cast<size_t>(pool.n_pages() * kv.page_bytes()), 0);
  std::vector<uint8_t> v_pages(static_cast<size_t>(pool.n_pages() * vv.page_bytes()), 0);
  const size_t n_kv = static_cast<size_t>(c.n_keys) * H * D;
  const std::vector<float> k = random_values(n_kv, c.seed), v = random_values(n_kv, c.seed + 1);
  std::vector<float> k_vals(n_kv), v_vals(n_kv);
  const PackOptions opt{static_cast<size_t>(c.group), 0.05f};
  for (int64_t t = 0; t < c.n_keys; ++t) {
    for (int g = 0; g < H; ++g) {
      const size_t o = (static_cast<size_t>(t) * H + g) * D;
      std::span<uint8_t> kr(k_pages.data() + kv.row_offset(0, t, g),
                            static_cast<size_t>(kf.row_bytes));
      std::span<uint8_t> vr(v_pages.data() + vv.row_offset(0, t, g),
                            static_cast<size_t>(vf.row_bytes));
      pack_row(c.k_format, std::span<const float>(k.data() + o, static_cast<size_t>(D)), kr, opt);
      pack_row(c.v_format, std::span<const float>(v.data() + o, static_cast<size_t>(D)), vr, opt);
      unpack_row(c.k_format, kr, std::span<float>(k_vals.data() + o, static_cast<size_t>(D)), opt);
      unpack_row(c.v_format, vr, std::span<float>(v_vals.data() + o, static_cast<size_t>(D)), opt);
    }
  }
  const std::vector<float> q =
      random_values(static_cast<size_t>(c.n_queries) * c.n_heads * D, c.seed + 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> scores(static_cast<size_t>(c.n_heads * c.n_queries * c.n_keys), nan);
  std::vector<float> out(static_cast<size_t>(c.n_queries) * c.n_heads * D, nan);
  std::vector<float> scratch(n_kv, nan);
  const std::vector<float> scales(static_cast<size_t>(H), 0.05f);
  gpu::BatchedAttentionParams p;
  p.k = kv;
  p.v = vv;
  p.k_format = kf;
  p.v_format = vf;
  p.n_queries = c.n_queries;
  p.n_keys = c.n_keys;
  p.pos0 = c.n_keys - c.n_queries;
  p.window = c.window;
  p.n_heads = c.n_heads;
  p.n_kv_heads = H;
  p.head_dim = D;
  p.sm_scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> k_scratch = scratch, v_scratch = scratch;
  if (!on_gpu) {
    p.q = q.data();
    p.k.pages = k_pages.data();
    p.v.pages = v_pages.data();
    p.k_fp8_scales = p.v_fp8_scales = scales.data();
    p.k_scratch = k_scratch.data();
    p.v_scratch = v_scratch.data();
    p.scores = scores.data();
    p.out = out.data();
    KVPLAN_EXPECT_OK(gpu::ref::batched_attention(p));
  } else {
    DeviceArena mem;
    p.q = mem.upload(q);
    p.k.pages = mem.upload(k_pages);
    p.v.pages = mem.upload(v_pages);
    p.k.page_table = p.v.page_table = mem.upload(pool.table);
    p.k_fp8_scales = p.v_fp8_scales = mem.upload(scales);
    p.k_scratch = mem.upload(scratch);
    p.v_scratch = mem.upload(scratch);
    p.scores = mem.upload(scores);
    p.out = mem.upload(out);
    ASSERT_FALSE(::testing::Test::HasFailure());
    KVPLAN_EXPECT_OK(gpu::batched_attention(p, nullptr));
    KVPLAN_EXPECT_OK(gpu::stream_synchronize(nullptr));
    scores = mem.download(p.scores, scores.size());
    out = mem.download(p.out, out.size());
    k_scratch = mem.download(p.k_scratch, n_kv);
    v_scratch = mem.download(p.v_scratch, n_kv);
  }
  ASSERT_TRUE(all_finite(scores) && all_finite(out)) << "outputs not fully written";
  EXPECT_EQ(std::memcmp(k_scratch.data(), k_vals.data(), n_kv * sizeof(float)), 0)
      << "unpacked K differs from src/formats";
  EXPECT_EQ(std::memcmp(v_scratch.data(), v_vals.data(), n_kv * sizeof(float)), 0)
      << "unpacked V differs from src/formats";
  double worst_out = 0, worst_score = 0;
  std::vector<double> ref;
  for (int64_t i = 0; i < c.n_queries; ++i) {
    const int64_t last = p.pos0 + i;
    const int64_t first = c.window > 0 && last + 1 > c.window ? last + 1 - c.window : 0;
    for (int h = 0; h < c.n_heads; ++h) {
      const float* qi = q.data() + (static_cast<size_t>(i) * c.n_heads + h) * D;
      const size_t col = static_cast<size_t>(h / group) * D;
      attention_f64(qi, k_vals, v_vals, first, last, static_cast<size_t>(H) * D, col, D,
                    1.0 / std::sqrt(static_cast<double>(D)), &ref, nullptr);
      worst_out =
          std::max(worst_out,
                   relative_error(out.data() + (static_cast<size_t>(i) * c.n_heads + h) * D, ref));
      // Probabilities: f64 softmax of the same row (one-hot value vectors give them directly).
      std::vector<double> prob(static_cast<size_t>(c.n_keys), 0.0);
      double max = -1e300, sum = 0;
      for (int64_t j = first; j <= last; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d)
          dot += static_cast<double>(qi[d]) * k_vals[static_cast<size_t>(j) * H * D + col + d];
        prob[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(D));
        max = std::max(max, prob[static_cast<size_t>(j)]);
      }
      for (int64_t j = first; j <= last; ++j)
        sum += (prob[static_cast<size_t>(j)] = std::exp(prob[static_cast<size_t>(j)] - max));
      for (int64_t j = first; j <= last; ++j) prob[static_cast<size_t>(j)] /= sum;
      const float* row = scores.data() + (static_cast<size_t>(h) * c.n_queries + i) * c.n_keys;
      worst_score = std::max(worst_score, relative_error(row, prob));
      for (int64_t j = 0; j < c.n_keys; ++j) {
        if (j < first || j > last) {
          EXPECT_EQ(row[j], 0.0f) << "masked probability at " << j;
        }
      }
    }
  }
  std::printf(
      "[   info   ] batched %s/%s window=%lld%s: max relative error vs f64: outputs %.3g, "
      "probabilities %.3g\n",
      c.k_format.name().c_str(), c.v_format.name().c_str(), static_cast<long long>(c.window),
      on_gpu ? " [gpu]" : "", worst_out, worst_score);
  EXPECT_LE(worst_out, 1e-3) << "outputs vs f64";
  EXPECT_LE(worst_score, 1e-3) << "probabilities vs f64";
}

}  // namespace kvplan::test
