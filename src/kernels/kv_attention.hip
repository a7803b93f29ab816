// Attention over packed KV pages: decode (one query per sequence, split over tokens with an online
// softmax, GQA) and the profiler's batched causal attention. kv_reference.h holds the same
// algorithms on the CPU.
#include "kernels/gpu_compat.h"
#include "kernels/kv_kernels.h"

namespace kvplan::gpu {
namespace {

// Dynamic shared memory of decode_attention_kernel, in floats:
//   q [group, D] | K tile [kDecodeTile, D + 1] (padded: threads read different rows, same column)
//   | V tile [kDecodeTile, D] | probabilities [group, kDecodeTile] | max, sum, rescale [3, group]
__host__ __device__ inline int decode_smem_floats(int group, int D) {
  return group * D + kDecodeTile * (D + 1) + kDecodeTile * D + group * kDecodeTile + 3 * group;
}

// Grid (n_splits, n_kv_heads, batch); block kAttentionThreads. Each block attends the query heads
// of one KV head (GQA: K/V rows are dequantized once for the whole group) over one split of one
// sequence's tokens, and writes the split's unnormalised output and (max, sum) to the workspace.
__global__ void decode_attention_kernel(DecodeAttentionParams p, int n_splits,
                                        int64_t split_tokens) {
  const int s = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, n_threads = blockDim.x;
  const int D = p.head_dim, group = p.n_heads / p.n_kv_heads;
  const int64_t len = p.seq_lens[b];
  const int64_t t0 = s * split_tokens;
  const int64_t t1 = t0 + split_tokens < len ? t0 + split_tokens : len;
  const float k_scale = p.k_fp8_scales ? p.k_fp8_scales[g] : 1.0f;
  const float v_scale = p.v_fp8_scales ? p.v_fp8_scales[g] : 1.0f;

  extern __shared__ float smem[];
  float* q_s = smem;
  float* k_s = q_s + group * D;
  float* v_s = k_s + kDecodeTile * (D + 1);
  float* p_s = v_s + kDecodeTile * D;
  float* m_s = p_s + group * kDecodeTile;
  float* l_s = m_s + group;
  float* alpha_s = l_s + group;

  const float* q = p.q + (static_cast<int64_t>(b) * p.n_heads + g * group) * D;
  for (int i = tid; i < group * D; i += n_threads) q_s[i] = q[i];
  if (tid < group) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }
  float acc[kMaxAccPerThread];
  for (int k = 0; k < kMaxAccPerThread; ++k) acc[k] = 0.0f;
  const int n_pairs = group * D;
  const int units_k = kDecodeTile * p.k_format.n_units;
  const int units_v = kDecodeTile * p.v_format.n_units;
  __syncthreads();

  for (int64_t tile = t0; tile < t1; tile += kDecodeTile) {
    const int n = static_cast<int>(t1 - tile < kDecodeTile ? t1 - tile : kDecodeTile);
    // Dequantize the tile's K and V rows straight from the pages, one unit per thread.
    for (int i = tid; i < units_k + units_v; i += n_threads) {
      const bool is_k = i < units_k;
      const RowFormat& f = is_k ? p.k_format : p.v_format;
      const int i_f = is_k ? i : i - units_k;
      const int j = i_f / f.n_units, u = i_f % f.n_units;
      float* dst = is_k ? k_s + j * (D + 1) : v_s + j * D;
      if (j < n) {
        const uint8_t* row = is_k ? p.k.row(b, tile + j, g) : p.v.row(b, tile + j, g);
        dequantize_row_unit(f, row, u, dst, is_k ? k_scale : v_scale);
      } else {
        for (int k = 0; k < row_unit_values(f, u); ++k) dst[u * f.unit_values + k] = 0.0f;
      }
    }
    __syncthreads();
    for (int i = tid; i < group * kDecodeTile; i += n_threads) {
      const int h = i / kDecodeTile, j = i % kDecodeTile;
      float score = -INFINITY;
      if (j < n) {
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += q_s[h * D + d] * k_s[j * (D + 1) + d];
        score = dot * p.sm_scale;
      }
      p_s[i] = score;
    }
    __syncthreads();
    // Online softmax (Milakov & Gimelshein 2018): rescale the running sum and output by
    // exp(m_old - m_new) whenever the running max grows.
    if (tid < group) {
      float* ps = p_s + tid * kDecodeTile;
      float tile_max = -INFINITY;
      for (int j = 0; j < n; ++j) tile_max = fmaxf(tile_max, ps[j]);
      const float m_new = fmaxf(m_s[tid], tile_max);
      const float alpha = expf(m_s[tid] - m_new);
      float sum = 0.0f;
      for (int j = 0; j < kDecodeTile; ++j) {
        const float e = j < n ? expf(ps[j] - m_new) : 0.0f;
        ps[j] = e;
        sum += e;
      }
      l_s[tid] = l_s[tid] * alpha + sum;
      m_s[tid] = m_new;
      alpha_s[tid] = alpha;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kMaxAccPerThread; ++k) {
      const int pair = tid + k * n_threads;
      if (pair < n_pairs) {
        const int h = pair / D, d = pair % D;
        float a = acc[k] * alpha_s[h];
        for (int j = 0; j < n; ++j) a += p_s[h * kDecodeTile + j] * v_s[j * D + d];
        acc[k] = a;
      }
    }
    __syncthreads();  // the next tile overwrites k_s, v_s, p_s
  }

  const int64_t row0 = (static_cast<int64_t>(b) * p.n_heads + g * group) * n_splits + s;
  float* part_o = p.workspace;
  float* part_ml = p.workspace + static_cast<int64_t>(p.batch) * p.n_heads * n_splits * D;
#pragma unroll
  for (int k = 0; k < kMaxAccPerThread; ++k) {
    const int pair = tid + k * n_threads;
    if (pair < n_pairs) {
      const int h = pair / D, d = pair % D;
      part_o[(row0 + static_cast<int64_t>(h) * n_splits) * D + d] = acc[k];
    }
  }
  if (tid < group) {
    const int64_t row = row0 + static_cast<int64_t>(tid) * n_splits;
    part_ml[row * 2] = m_s[tid];
    part_ml[row * 2 + 1] = l_s[tid];
  }
}

// Grid batch * n_heads: out = sum_s exp(m_s - M) o_s / sum_s exp(m_s - M) l_s.
__global__ void decode_merge_kernel(DecodeAttentionParams p, int n_splits) {
  const int64_t bh = blockIdx.x;
  const int D = p.head_dim;
  const float* part_o = p.workspace + bh * n_splits * D;
  const float* part_ml =
      p.workspace + static_cast<int64_t>(p.batch) * p.n_heads * n_splits * D + bh * n_splits * 2;
  float M = -INFINITY;
  for (int s = 0; s < n_splits; ++s) M = fmaxf(M, part_ml[2 * s]);
  float L = 0.0f;
  for (int s = 0; s < n_splits; ++s) L += part_ml[2 * s + 1] * expf(part_ml[2 * s] - M);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < n_splits; ++s) o += part_o[s * D + d] * expf(part_ml[2 * s] - M);
    p.out[bh * D + d] = o / L;
  }
  if (threadIdx.x == 0 && p.lse != nullptr) p.lse[bh] = M + logf(L);
}

// Tree reduction over the block (blockDim.x a power of two) in `red` [blockDim.x].
template <bool kMax>
__device__ float block_reduce(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float o = red[threadIdx.x + stride];
      red[threadIdx.x] = kMax ? fmaxf(red[threadIdx.x], o) : red[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

// Grid (n_queries, n_heads); block kAttentionThreads. K/V are the unpacked f32 scratch rows
// [n_keys, n_kv_heads, D]; the probability row doubles as the scores' scratch.
__global__ void batched_attention_kernel(BatchedAttentionParams p) {
  const int64_t i = blockIdx.x;
  const int h = blockIdx.y;
  const int tid = threadIdx.x, n_threads = blockDim.x;
  const int D = p.head_dim, g = h / (p.n_heads / p.n_kv_heads);
  const int64_t last = p.pos0 + i;
  const int64_t first = p.window > 0 && last + 1 > p.window ? last + 1 - p.window : 0;
  extern __shared__ float smem[];
  float* q_s = smem;      // [D]
  float* red = smem + D;  // [n_threads]
  for (int d = tid; d < D; d += n_threads) q_s[d] = p.q[(i * p.n_heads + h) * D + d];
  __syncthreads();
  float* sc = p.scores + (static_cast<int64_t>(h) * p.n_queries + i) * p.n_keys;
  float local_max = -INFINITY;
  for (int64_t j = first + tid; j <= last; j += n_threads) {
    const float* k = p.k_scratch + (j * p.n_kv_heads + g) * D;
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += q_s[d] * k[d];
    sc[j] = dot * p.sm_scale;
    local_max = fmaxf(local_max, sc[j]);
  }
  const float max = block_reduce<true>(local_max, red);
  float local_sum = 0.0f;
  for (int64_t j = first + tid; j <= last; j += n_threads) {
    const float e = expf(sc[j] - max);
    sc[j] = e;
    local_sum += e;
  }
  const float inv = 1.0f / block_reduce<false>(local_sum, red);
  for (int64_t j = tid; j < p.n_keys; j += n_threads)
    sc[j] = j >= first && j <= last ? sc[j] * inv : 0.0f;
  __syncthreads();  // every thread reads the whole probability row below
  for (int d = tid; d < D; d += n_threads) {
    float o = 0.0f;
    for (int64_t j = first; j <= last; ++j)
      o += sc[j] * p.v_scratch[(j * p.n_kv_heads + g) * D + d];
    p.out[(i * p.n_heads + h) * D + d] = o;
  }
}

}  // namespace

Status decode_attention(const DecodeAttentionParams& p, Stream stream) {
  if (Status s = check_decode_params(p); !s.ok()) return s;
  const int group = p.n_heads / p.n_kv_heads;
  const size_t smem = static_cast<size_t>(decode_smem_floats(group, p.head_dim)) * sizeof(float);
  if (smem > 48 * 1024)
    return unimplemented("group * head_dim: decode needs <= 48 KiB shared memory (head_dim <= 256)",
                         "decode_attention");
  const int n_splits = p.n_splits > 0
                           ? p.n_splits
                           : decode_attention_default_splits(p.batch, p.n_kv_heads, p.max_seq_len);
  const int64_t split_tokens = decode_attention_split_tokens(p.max_seq_len, n_splits);
  hipStream_t s = static_cast<hipStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(p.n_kv_heads),
                  static_cast<unsigned>(p.batch));
  decode_attention_kernel<<<grid, kAttentionThreads, smem, s>>>(p, n_splits, split_tokens);
  KVPLAN_GPU_CHECK_LAUNCH("decode_attention_kernel");
  const int merge_threads = p.head_dim < 256 ? p.head_dim : 256;
  decode_merge_kernel<<<static_cast<unsigned>(p.batch * p.n_heads), merge_threads, 0, s>>>(
      p, n_splits);
  KVPLAN_GPU_CHECK_LAUNCH("decode_merge_kernel");
  return ok_status();
}

Status batched_attention(const BatchedAttentionParams& p, Stream stream) {
  if (Status s = check_batched_params(p); !s.ok()) return s;
  const UnpackPageParams uk{p.k, p.k_format, 0, 0, p.n_keys, p.k_fp8_scales, p.k_scratch};
  const UnpackPageParams uv{p.v, p.v_format, 0, 0, p.n_keys, p.v_fp8_scales, p.v_scratch};
  if (Status s = unpack_page(uk, stream); !s.ok()) return s;
  if (Status s = unpack_page(uv, stream); !s.ok()) return s;
  const dim3 grid(static_cast<unsigned>(p.n_queries), static_cast<unsigned>(p.n_heads));
  const size_t smem = static_cast<size_t>(p.head_dim + kAttentionThreads) * sizeof(float);
  hipStream_t s = static_cast<hipStream_t>(stream);
  batched_attention_kernel<<<grid, kAttentionThreads, smem, s>>>(p);
  KVPLAN_GPU_CHECK_LAUNCH("batched_attention_kernel");
  return ok_status();
}

}  // namespace kvplan::gpu
