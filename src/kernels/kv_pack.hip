// Pack f32/f16/bf16 [tokens, kv_heads, head_dim] into a layer's paged, packed format and back.
// One thread per unit (a ggml block, an int group, or 32 plain/FP8 values) of one token's row for
// one KV head, calling the same per-unit functions as src/formats, so codes are bit-identical.
#include "kernels/gpu_compat.h"
#include "kernels/kv_kernels.h"

namespace kvplan::gpu {
namespace {

constexpr int kPackThreads = 256;

// kUnitBuf: the most values one unit may hold (32 for ggml blocks, plain/FP8 formats and int
// groups <= 32; kMaxRowValues for wider int groups, which then live in local memory).
template <int kUnitBuf>
__global__ void pack_page_kernel(PackPageParams p) {
  const RowFormat& f = p.format;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = p.src.n_tokens * p.src.n_heads * f.n_units;
  if (idx >= total) return;
  const int u = static_cast<int>(idx % f.n_units);
  const int64_t row = idx / f.n_units;
  const int h = static_cast<int>(row % p.src.n_heads);
  const int64_t t = row / p.src.n_heads;
  const int n = row_unit_values(f, u);
  float x[kUnitBuf];
  for (int i = 0; i < n; ++i) x[i] = p.src.load(t, h, u * f.unit_values + i);
  const float scale = p.fp8_scales ? p.fp8_scales[h] : 1.0f;
  quantize_row_unit_values(f, x, u, p.dst.row(p.seq, p.first_token + t, h), scale);
}

__global__ void unpack_page_kernel(UnpackPageParams p) {
  const RowFormat& f = p.format;
  const int n_heads = p.src.n_kv_heads;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = p.n_tokens * n_heads * f.n_units;
  if (idx >= total) return;
  const int u = static_cast<int>(idx % f.n_units);
  const int64_t row = idx / f.n_units;
  const int h = static_cast<int>(row % n_heads);
  const int64_t t = row / n_heads;
  const float scale = p.fp8_scales ? p.fp8_scales[h] : 1.0f;
  dequantize_row_unit(f, p.src.row(p.seq, p.first_token + t, h), u, p.dst + row * f.row_values,
                      scale);
}

unsigned blocks_for(int64_t threads) {
  return static_cast<unsigned>((threads + kPackThreads - 1) / kPackThreads);
}

}  // namespace

Status pack_page(const PackPageParams& p, Stream stream) {
  if (Status s = check_pack_params(p); !s.ok()) return s;
  const int64_t total = p.src.n_tokens * p.src.n_heads * p.format.n_units;
  if (total == 0) return ok_status();
  hipStream_t s = static_cast<hipStream_t>(stream);
  // Runtime unit size -> compile-time buffer: 32 (every block/plain format, int groups <= 32)
  // or the largest row kvplan accepts.
  if (p.format.unit_values <= 32) {
    pack_page_kernel<32><<<blocks_for(total), kPackThreads, 0, s>>>(p);
  } else {
    pack_page_kernel<kMaxRowValues><<<blocks_for(total), kPackThreads, 0, s>>>(p);
  }
  KVPLAN_GPU_CHECK_LAUNCH("pack_page_kernel");
  return ok_status();
}

Status unpack_page(const UnpackPageParams& p, Stream stream) {
  if (Status s = check_unpack_params(p); !s.ok()) return s;
  const int64_t total = p.n_tokens * p.src.n_kv_heads * p.format.n_units;
  if (total == 0) return ok_status();
  unpack_page_kernel<<<blocks_for(total), kPackThreads, 0, static_cast<hipStream_t>(stream)>>>(p);
  KVPLAN_GPU_CHECK_LAUNCH("unpack_page_kernel");
  return ok_status();
}

}  // namespace kvplan::gpu
