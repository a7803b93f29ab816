// A weight matrix kept in the type its file stores it in (GGUF Q4_K, Q4_1, ...; safetensors
// BF16/F16/F32), read in place from the memory-mapped file and dequantized a tile at a time inside
// the products, so a model takes about its file size in memory rather than 4 bytes a parameter.
//
// The matrix is [rows, cols] (PyTorch's Linear.weight order; GGUF's dims reversed): each row is
// `cols` contiguous values, a whole number of the type's blocks. A matrix may stack several stored
// tensors of the same width and different types (fused Q/K/V, gate/up), one part each.
//
// Products are computed in tiles of rows whose size depends on the matrix shape only, each tile
// with a single-threaded Eigen product, so results do not depend on the thread count.
//
//   auto w = kvplan::WeightMatrix::borrowed(GgmlType::kQ4_K, bytes, 576, 1536, file, "attn_q");
//   kvplan::matmul_transposed(x, w, y);   // y = x * w^T, [T, 576]
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "model/ggml_type.h"

namespace kvplan {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::Matrix<float, 1, Eigen::Dynamic>;  // a row vector: broadcasts over [T, n]

class WeightMatrix {
 public:
  WeightMatrix() = default;

  // `bytes` hold rows x cols values of `type` row after row; `owner` keeps them alive (the mapped
  // file). Throws Error naming `what` (file and tensor): kInvalidArgument when cols is not a whole
  // number of blocks or the bytes are not exactly rows x row_bytes, kUnimplemented for a type
  // that cannot be dequantized.
  static WeightMatrix borrowed(GgmlType type, std::span<const std::byte> bytes, int64_t rows,
                               int64_t cols, std::shared_ptr<const void> owner,
                               std::string_view what);
  // The rows of `parts` one after another (all parts have the same cols).
  static WeightMatrix stacked(const std::vector<WeightMatrix>& parts);

  [[nodiscard]] int64_t rows() const { return rows_; }
  [[nodiscard]] int64_t cols() const { return cols_; }
  [[nodiscard]] int64_t size() const { return rows_ * cols_; }
  [[nodiscard]] bool empty() const { return rows_ == 0; }
  // Bytes the values take as stored.
  [[nodiscard]] uint64_t stored_bytes() const;

  // Rows [first, first + n) as f32 into `out` (n x cols, row-major).
  void dequantize_rows(int64_t first, int64_t n, float* out) const;
  [[nodiscard]] RowMatrix to_dense() const;

 private:
  struct Part {
    GgmlType type = GgmlType::kF32;
    const std::byte* data = nullptr;
    int64_t first_row = 0;
    int64_t rows = 0;
    size_t row_bytes = 0;
  };
  friend void matmul_transposed(const RowMatrix& x, const WeightMatrix& w, RowMatrix& y);

  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::vector<Part> parts_;
  std::vector<std::shared_ptr<const void>> owners_;
};

// Runs Eigen's products on one thread while alive: where the parallelism is over work items
// (tiles, heads, prompts), and small products lose more to thread start-up than they gain.
// Eigen's thread count is global, so only a scope opened outside any OpenMP parallel region
// changes it; one opened inside (where Eigen already keeps to one thread) does nothing.
class SerialEigenScope {
 public:
  SerialEigenScope();
  ~SerialEigenScope();
  SerialEigenScope(const SerialEigenScope&) = delete;
  SerialEigenScope& operator=(const SerialEigenScope&) = delete;

 private:
  int saved_;  // 0: nothing to restore
};

// Eigen sizes a product's blocks from the cache sizes the CPU reports at run time, and the depth
// of a block decides where partial sums are added: two CPUs with different L1 data caches (48 KiB
// on Sapphire Rapids, 32 KiB on Skylake-SP) give different bits for the same product of a
// 576-deep model. Every program that includes this header plans its products with these sizes
// instead, set once before main (docs/determinism.md).
inline constexpr std::ptrdiff_t kEigenPlanL1Bytes = 32 * 1024;
inline constexpr std::ptrdiff_t kEigenPlanL2Bytes = 1024 * 1024;
inline constexpr std::ptrdiff_t kEigenPlanL3Bytes = 32 * 1024 * 1024;
bool plan_eigen_products_with_fixed_cache_sizes();  // always true
inline const bool kEigenCacheSizesFixed = plan_eigen_products_with_fixed_cache_sizes();

// A row of x gets the same bits in every product that has at least this many rows (batches of
// sequences, and subsets of a sequence's rows, rely on it); fewer rows take dot products.
inline constexpr int64_t kMinRowsForSameBits = 4;

// y = x * w^T: [T, w.rows()]. Exact f32 products of the dequantized values; the same bits for any
// thread count.
void matmul_transposed(const RowMatrix& x, const WeightMatrix& w, RowMatrix& y);

}  // namespace kvplan
