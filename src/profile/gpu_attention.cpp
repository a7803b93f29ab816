#include "profile/gpu_attention.h"

#include <algorithm>

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "gpu/device_buffer.h"
#include "gpu/gpu_error.h"
#include "kernels/kv_kernels.h"

namespace kvplan {
namespace {

// The buffers grow to the largest request and are reused across calls.
constexpr std::string_view kBufferWhat = "profile on the GPU: device buffer";

// Every failure names the profiler, then the step ("profile on the GPU: upload Q: ...").
void check(const gpu::Status& s, std::string_view step) {
  if (!s.ok()) check_gpu(s, fmt::format("profile on the GPU: {}", step));
}

}  // namespace

struct GpuAttention::Buffers {
  gpu::Stream stream = nullptr;
  gpu::DeviceBuffer q, k, v, k_pages, v_pages, k_scratch, v_scratch, scores, out, k_scales,
      v_scales;
  ~Buffers() {
    if (stream != nullptr) (void)gpu::stream_destroy(stream);
  }
};

GpuAttention::GpuAttention(int device) : device_(device), buffers_(std::make_unique<Buffers>()) {
  check(gpu::set_device(device), "select device");
  check(gpu::stream_create(&buffers_->stream), "create stream");
}

GpuAttention::~GpuAttention() = default;

bool GpuAttention::supports(const QuantSettings& settings, std::span<const KvPair> candidates) {
  return std::none_of(candidates.begin(), candidates.end(),
                      [&](const KvPair& p) { return layer_runs_kivi(p, settings); });
}

GpuAttention::Result GpuAttention::attend(const RowMatrix& q, const RowMatrix& k,
                                          const RowMatrix& v, Format key_format,
                                          Format value_format, const QuantSettings& settings,
                                          const AttentionLayerShape& shape,
                                          const KvHeadScales& fp8_scales) {
  std::lock_guard<std::mutex> lock(mu_);
  check(gpu::set_device(device_), "select device");
  Buffers& b = *buffers_;
  const int64_t T = q.rows();
  const int H = shape.n_heads, G = shape.n_kv_heads, D = shape.head_dim;
  const size_t q_bytes = static_cast<size_t>(q.size()) * sizeof(float);
  const size_t kv_bytes = static_cast<size_t>(k.size()) * sizeof(float);
  const RowFormat kf =
      kernel_row_format(key_format, D, static_cast<int>(settings.group_size), "profile on the GPU");
  const RowFormat vf = kernel_row_format(value_format, D, static_cast<int>(settings.group_size),
                                         "profile on the GPU");

  void* d_q = b.q.reserve(q_bytes, kBufferWhat);
  void* d_k = b.k.reserve(kv_bytes, kBufferWhat);
  void* d_v = b.v.reserve(kv_bytes, kBufferWhat);
  check(gpu::copy_to_device(d_q, q.data(), q_bytes, b.stream), "upload Q");
  check(gpu::copy_to_device(d_k, k.data(), kv_bytes, b.stream), "upload K");
  check(gpu::copy_to_device(d_v, v.data(), kv_bytes, b.stream), "upload V");
  // Per-head FP8 scales, or null (= 1) for a side that has none.
  auto upload_scales = [&](gpu::DeviceBuffer& buf,
                           const std::vector<float>& scales) -> const float* {
    if (scales.empty()) return nullptr;
    const size_t bytes = scales.size() * sizeof(float);
    void* d = buf.reserve(bytes, kBufferWhat);
    check(gpu::copy_to_device(d, scales.data(), bytes, b.stream), "upload FP8 scales");
    return static_cast<const float*>(d);
  };
  const float* d_k_scales = upload_scales(b.k_scales, fp8_scales.key);
  const float* d_v_scales = upload_scales(b.v_scales, fp8_scales.value);

  // One page holds the whole prompt: [T, G] rows of the format's row_bytes.
  auto pages = [&](gpu::DeviceBuffer& buf, const RowFormat& f) {
    PagedKvView view;
    view.page_size = T;
    view.n_kv_heads = G;
    view.row_bytes = f.row_bytes;
    view.page_table_stride = 1;
    view.pages = buf.reserve<uint8_t>(static_cast<size_t>(view.page_bytes()), kBufferWhat);
    return view;
  };
  gpu::PackPageParams pk;
  pk.src = dense_view(d_k, DenseType::kF32, T, G, D);
  pk.dst = pages(b.k_pages, kf);
  pk.format = kf;
  pk.fp8_scales = d_k_scales;
  check(gpu::pack_page(pk, b.stream), "pack K");
  gpu::PackPageParams pv = pk;
  pv.src = dense_view(d_v, DenseType::kF32, T, G, D);
  pv.dst = pages(b.v_pages, vf);
  pv.format = vf;
  pv.fp8_scales = d_v_scales;
  check(gpu::pack_page(pv, b.stream), "pack V");

  gpu::BatchedAttentionParams a;
  a.q = static_cast<const float*>(d_q);
  a.k = pk.dst;
  a.v = pv.dst;
  a.k_format = kf;
  a.v_format = vf;
  a.k_fp8_scales = d_k_scales;
  a.v_fp8_scales = d_v_scales;
  a.n_queries = T;
  a.n_keys = T;
  a.pos0 = 0;
  a.window = shape.window;
  a.n_heads = H;
  a.n_kv_heads = G;
  a.head_dim = D;
  a.sm_scale = 1.0f / std::sqrt(static_cast<float>(D));
  a.k_scratch = static_cast<float*>(b.k_scratch.reserve(kv_bytes, kBufferWhat));
  a.v_scratch = static_cast<float*>(b.v_scratch.reserve(kv_bytes, kBufferWhat));
  const size_t score_bytes = static_cast<size_t>(H) * static_cast<size_t>(T * T) * sizeof(float);
  a.scores = static_cast<float*>(b.scores.reserve(score_bytes, kBufferWhat));
  a.out = static_cast<float*>(b.out.reserve(q_bytes, kBufferWhat));
  check(gpu::batched_attention(a, b.stream), "batched attention");

  Result r;
  r.out.resize(T, static_cast<Eigen::Index>(H) * D);
  check(gpu::copy_to_host(r.out.data(), a.out, q_bytes, b.stream), "download outputs");
  std::vector<float> scores(static_cast<size_t>(H) * static_cast<size_t>(T * T));
  check(gpu::copy_to_host(scores.data(), a.scores, score_bytes, b.stream), "download scores");
  check(gpu::stream_synchronize(b.stream), "synchronize");
  r.probabilities.resize(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h) {
    RowMatrix& p = r.probabilities[static_cast<size_t>(h)];
    p.resize(T, T);
    std::memcpy(p.data(), scores.data() + static_cast<size_t>(h) * static_cast<size_t>(T * T),
                static_cast<size_t>(T * T) * sizeof(float));
  }
  return r;
}

}  // namespace kvplan
