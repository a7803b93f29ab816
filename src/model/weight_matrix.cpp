#include "model/weight_matrix.h"

#include <algorithm>
#include <cstring>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "model/tensor_dequant.h"

namespace kvplan {
namespace {

// A tile's dequantized rows stay in the core's L2 cache while its product runs. Tiles are whole
// multiples of 48 rows (the rows Eigen's kernel takes at once: three AVX-512 packets, six AVX
// ones), which makes each tile's product bit-identical to the same rows of one product over the
// whole matrix: so the tile size may follow the thread count without changing any result.
constexpr int64_t kTileBytes = 1024 * 1024;
constexpr int64_t kTileRowQuantum = 48;
// Eigen's kernel width in rows of x (nr = 4 columns of x^T on AVX/AVX-512).
constexpr int64_t kRowGroup = 4;
static_assert(kMinRowsForSameBits == kRowGroup, "the padding below is what makes the promise");

// Rows per tile of a part of `rows` x `cols`: at most kTileBytes of f32, and at least one tile
// per thread where the part has the rows for it, so that every thread gets a share.
int64_t tile_rows_for(int64_t rows, int64_t cols, int threads) {
  const int64_t most =
      kTileRowQuantum * std::max<int64_t>(1, kTileBytes / (kTileRowQuantum * cols *
                                                           static_cast<int64_t>(sizeof(float))));
  int64_t tiles = (rows + most - 1) / most;
  if (rows >= kTileRowQuantum * threads) tiles = (tiles + threads - 1) / threads * threads;
  const int64_t per_tile = (rows + tiles - 1) / tiles;
  return (per_tile + kTileRowQuantum - 1) / kTileRowQuantum * kTileRowQuantum;
}

// Below this many multiply-adds a product runs on the calling thread (thread start-up and the
// barrier would cost more than they save); the bits are the same either way.
constexpr double kParallelWork = 1 << 22;

struct Tile {
  size_t part;
  int64_t first_row;  // within the part
  int64_t rows;
};

bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel() != 0;
#else
  return true;
#endif
}

// Threads a product's parallel region would get (nested regions get one).
int team_size() {
#ifdef _OPENMP
  return in_parallel_region() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace

bool plan_eigen_products_with_fixed_cache_sizes() {
  Eigen::setCpuCacheSizes(kEigenPlanL1Bytes, kEigenPlanL2Bytes, kEigenPlanL3Bytes);
  return true;
}

SerialEigenScope::SerialEigenScope() : saved_(in_parallel_region() ? 0 : Eigen::nbThreads()) {
  if (saved_ != 0) Eigen::setNbThreads(1);
}

SerialEigenScope::~SerialEigenScope() {
  if (saved_ != 0) Eigen::setNbThreads(saved_);
}

WeightMatrix WeightMatrix::borrowed(GgmlType type, std::span<const std::byte> bytes, int64_t rows,
                                    int64_t cols, std::shared_ptr<const void> owner,
                                    std::string_view what) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  if (info == nullptr || !can_dequantize(type)) {
    fail(ErrorCode::kUnimplemented, "{}: type {} cannot be dequantized", what,
         info != nullptr ? std::string(info->name) : std::to_string(static_cast<uint32_t>(type)));
  }
  if (rows <= 0 || cols <= 0 || cols % info->block_values != 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: [{}, {}] of {} does not hold whole {}-value blocks per row", what, rows, cols,
         info->name, info->block_values);
  }
  const size_t row_bytes =
      static_cast<size_t>(cols / info->block_values) * static_cast<size_t>(info->block_bytes);
  if (bytes.size() != row_bytes * static_cast<size_t>(rows)) {
    fail(ErrorCode::kInvalidArgument, "{}: [{}, {}] of {} needs {} bytes, got {}", what, rows, cols,
         info->name, row_bytes * static_cast<size_t>(rows), bytes.size());
  }
  WeightMatrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  m.parts_.push_back({type, bytes.data(), 0, rows, row_bytes});
  m.owners_.push_back(std::move(owner));
  return m;
}

WeightMatrix WeightMatrix::stacked(const std::vector<WeightMatrix>& parts) {
  WeightMatrix m;
  for (const WeightMatrix& p : parts) {
    if (m.rows_ > 0 && p.cols_ != m.cols_) {
      fail(ErrorCode::kInvalidArgument, "weight matrix: cannot stack {} columns under {}", p.cols_,
           m.cols_);
    }
    m.cols_ = p.cols_;
    for (Part part : p.parts_) {
      part.first_row = m.rows_;
      m.rows_ += part.rows;
      m.parts_.push_back(part);
    }
    m.owners_.insert(m.owners_.end(), p.owners_.begin(), p.owners_.end());
  }
  return m;
}

uint64_t WeightMatrix::stored_bytes() const {
  uint64_t n = 0;
  for (const Part& p : parts_) n += p.row_bytes * static_cast<uint64_t>(p.rows);
  return n;
}

void WeightMatrix::dequantize_rows(int64_t first, int64_t n, float* out) const {
  if (first < 0 || n < 0 || first + n > rows_) {
    fail(ErrorCode::kOutOfRange, "weight matrix: rows [{}, {}) outside [0, {})", first, first + n,
         rows_);
  }
  for (const Part& p : parts_) {
    const int64_t begin = std::max(first, p.first_row);
    const int64_t end = std::min(first + n, p.first_row + p.rows);
    for (int64_t r = begin; r < end; ++r) {
      dequantize_row(p.type, p.data + static_cast<size_t>(r - p.first_row) * p.row_bytes,
                     static_cast<size_t>(cols_), out + (r - first) * cols_);
    }
  }
}

RowMatrix WeightMatrix::to_dense() const {
  RowMatrix m(rows_, cols_);
  dequantize_rows(0, rows_, m.data());
  return m;
}

void matmul_transposed(const RowMatrix& x, const WeightMatrix& w, RowMatrix& y) {
  if (x.cols() != w.cols()) {
    fail(ErrorCode::kInternal, "matmul: input [{}, {}] against weights [{}, {}]", x.rows(),
         x.cols(), w.rows(), w.cols());
  }
  y.resize(x.rows(), w.rows());
  std::vector<Tile> tiles;
  const int threads = team_size();
  for (size_t p = 0; p < w.parts_.size(); ++p) {
    const int64_t tile_rows = tile_rows_for(w.parts_[p].rows, w.cols(), threads);
    for (int64_t r = 0; r < w.parts_[p].rows; r += tile_rows) {
      tiles.push_back({p, r, std::min(tile_rows, w.parts_[p].rows - r)});
    }
  }
  const auto n_tiles = static_cast<int64_t>(tiles.size());
  const double work = static_cast<double>(x.rows()) * static_cast<double>(w.size());
  const bool parallel = n_tiles > 1 && work >= kParallelWork;
  // Eigen's kernel takes the rows of x four at a time and the last few by another path, whose
  // sums come out in another order: a row's bits would depend on how many rows share its
  // product. The last rows go through a product of four (zero-padded), so every row of x gets the
  // same bits in any product of four rows or more (the profiler batches its prompts on this).
  const int64_t whole_rows = x.rows() - x.rows() % kRowGroup;
  RowMatrix last_rows;
  if (x.rows() >= kRowGroup && whole_rows < x.rows()) {
    last_rows = RowMatrix::Zero(kRowGroup, x.cols());
    last_rows.topRows(x.rows() - whole_rows) = x.bottomRows(x.rows() - whole_rows);
  }
  // Eigen would split a tile's product over its own threads when called from a one-thread team:
  // the tiles are the parallelism here.
  const SerialEigenScope serial;
#pragma omp parallel if (parallel)
  {
    RowMatrix values;         // this thread's dequantized tile
    RowMatrix last_products;  // last_rows times the tile
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n_tiles; ++i) {
      const Tile& t = tiles[static_cast<size_t>(i)];
      const int64_t out_col = w.parts_[t.part].first_row + t.first_row;
      values.resize(t.rows, w.cols());
      w.dequantize_rows(out_col, t.rows, values.data());
      if (x.rows() >= kRowGroup) {
        y.middleCols(out_col, t.rows).topRows(whole_rows).noalias() =
            x.topRows(whole_rows) * values.transpose();
        if (last_rows.rows() > 0) {
          last_products.noalias() = last_rows * values.transpose();
          y.middleCols(out_col, t.rows).bottomRows(x.rows() - whole_rows) =
              last_products.topRows(x.rows() - whole_rows);
        }
      } else {
        // A few rows (decoding): one contiguous dot product per output.
        for (int64_t r = 0; r < t.rows; ++r) {
          for (int64_t q = 0; q < x.rows(); ++q) y(q, out_col + r) = values.row(r).dot(x.row(q));
        }
      }
    }
  }
}

}  // namespace kvplan
