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
// multiples of 48 rows (three AVX-512 packets of Eigen's kernel), which keeps the tiled product
// bit-identical to one product over the whole matrix.
constexpr int64_t kTileBytes = 512 * 1024;
constexpr int64_t kTileRowQuantum = 48;

int64_t tile_rows_for(int64_t cols) {
  const int64_t quanta =
      kTileBytes / (kTileRowQuantum * cols * static_cast<int64_t>(sizeof(float)));
  return kTileRowQuantum * std::max<int64_t>(1, quanta);
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

// Eigen would split a product over its own threads when called from a one-thread team; the tiles
// are the parallelism here, so each tile's product must be the single-threaded one. Eigen's thread
// count is global, so it is only changed from outside any parallel region.
class SerialEigenProducts {
 public:
  SerialEigenProducts() : saved_(in_parallel_region() ? 0 : Eigen::nbThreads()) {
    if (saved_ != 0) Eigen::setNbThreads(1);
  }
  ~SerialEigenProducts() {
    if (saved_ != 0) Eigen::setNbThreads(saved_);
  }
  SerialEigenProducts(const SerialEigenProducts&) = delete;
  SerialEigenProducts& operator=(const SerialEigenProducts&) = delete;

 private:
  int saved_;
};

}  // namespace

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

WeightMatrix WeightMatrix::from_f32(const RowMatrix& values) {
  auto copy = std::make_shared<std::vector<float>>(values.data(), values.data() + values.size());
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(copy->data()),
                                         copy->size() * sizeof(float));
  return borrowed(GgmlType::kF32, bytes, values.rows(), values.cols(), std::move(copy),
                  "f32 matrix");
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
  const int64_t tile_rows = tile_rows_for(w.cols());
  std::vector<Tile> tiles;
  for (size_t p = 0; p < w.parts_.size(); ++p) {
    for (int64_t r = 0; r < w.parts_[p].rows; r += tile_rows) {
      tiles.push_back({p, r, std::min(tile_rows, w.parts_[p].rows - r)});
    }
  }
  const auto n_tiles = static_cast<int64_t>(tiles.size());
  const double work = static_cast<double>(x.rows()) * static_cast<double>(w.size());
  const bool parallel = n_tiles > 1 && work >= kParallelWork;
  const SerialEigenProducts serial;
#pragma omp parallel if (parallel)
  {
    RowMatrix values;  // this thread's dequantized tile
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n_tiles; ++i) {
      const Tile& t = tiles[static_cast<size_t>(i)];
      const WeightMatrix::Part& part = w.parts_[t.part];
      values.resize(t.rows, w.cols());
      for (int64_t r = 0; r < t.rows; ++r) {
        dequantize_row(part.type, part.data + static_cast<size_t>(t.first_row + r) * part.row_bytes,
                       static_cast<size_t>(w.cols()), values.row(r).data());
      }
      const int64_t out_col = part.first_row + t.first_row;
      if (x.rows() >= 4) {
        y.middleCols(out_col, t.rows).noalias() = x * values.transpose();
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
