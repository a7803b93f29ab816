// Shared by the kernel tests: random K/V/Q, paged layouts with shuffled page tables, and the
// independent f64 attention reference (over values unpacked by src/formats, not by kernels/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "formats/format.h"
#include "formats/format_size.h"
#include "formats/pack.h"
#include "kernels/kv_kernels.h"

namespace kvplan::test {

// Values with outliers and a per-row offset, so min/max, sign and zero-point paths all matter.
inline std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = scale * normal(rng) * (rng() % 32 == 0 ? 8.0f : 1.0f);
  return v;
}

// The exact f32 value of each element after conversion to `type` (what the kernels read).
inline std::vector<uint16_t> to_narrow(const std::vector<float>& v, DenseType type) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = type == DenseType::kF16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
  return out;
}
inline std::vector<float> narrow_to_f32(const std::vector<uint16_t>& v, DenseType type) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = type == DenseType::kF16 ? f16_to_f32(v[i]) : bf16_to_f32(v[i]);
  return out;
}

// A page pool for `batch` sequences of up to max_tokens tokens, pages assigned in shuffled order
// (so a kernel that ignores the page table fails).
struct PagePool {
  int64_t page_size = 0, pages_per_seq = 0;
  std::vector<int32_t> table;  // [batch, pages_per_seq]
  int64_t n_pages() const { return static_cast<int64_t>(table.size()); }
};
inline PagePool make_page_pool(int batch, int64_t max_tokens, int64_t page_size, uint32_t seed) {
  PagePool p;
  p.page_size = page_size;
  p.pages_per_seq = (max_tokens + page_size - 1) / page_size;
  p.table.resize(static_cast<size_t>(batch * p.pages_per_seq));
  std::iota(p.table.begin(), p.table.end(), 0);
  std::shuffle(p.table.begin(), p.table.end(), std::mt19937(seed));
  return p;
}

inline RowFormat row_format(Format f, int head_dim, int group) {
  RowFormat r;
  EXPECT_TRUE(make_row_format(static_cast<uint16_t>(f.id()), head_dim, group, &r)) << f.name();
  return r;
}

// f64 softmax(q k^T * scale) v for one query head over rows [first, last] of k/v, which are
// [n_tokens, row_stride] with the head's row at column offset `col`.
inline void attention_f64(const float* q, const std::vector<float>& k, const std::vector<float>& v,
                          int64_t first, int64_t last, size_t row_stride, size_t col, int D,
                          double scale, std::vector<double>* out, double* lse) {
  std::vector<double> s(static_cast<size_t>(last - first + 1));
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = first; j <= last; ++j) {
    double dot = 0;
    for (int d = 0; d < D; ++d)
      dot += static_cast<double>(q[d]) * k[static_cast<size_t>(j) * row_stride + col + d];
    s[static_cast<size_t>(j - first)] = dot * scale;
    max = std::max(max, dot * scale);
  }
  double sum = 0;
  for (double& x : s) {
    x = std::exp(x - max);
    sum += x;
  }
  out->assign(static_cast<size_t>(D), 0.0);
  for (int64_t j = first; j <= last; ++j) {
    const double w = s[static_cast<size_t>(j - first)] / sum;
    for (int d = 0; d < D; ++d)
      (*out)[static_cast<size_t>(d)] += w * v[static_cast<size_t>(j) * row_stride + col + d];
  }
  if (lse) *lse = max + std::log(sum);
}

// max |a - b| / max |b|: the relative error of a whole output vector.
inline double relative_error(const float* a, const std::vector<double>& b) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(b[i]));
  }
  return diff / std::max(mag, 1e-30);
}

inline bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

// Formats the kernels support (every concrete catalogue format).
inline std::vector<Format> kernel_formats() {
  std::vector<Format> out;
  for (const KvFormatTraits& info : format_table()) out.push_back(Format(info.id));
  return out;
}

}  // namespace kvplan::test
