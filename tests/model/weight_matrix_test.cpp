// Weight matrices kept in their stored type: products against the dense f32 matrix, thread-count
// and batch independence, products planned with fixed cache sizes, stacked parts of different
// types, and bytes that do not fit the shape.
#include "model/weight_matrix.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/float_convert.h"
#include "formats/kv_format_math.h"
#include "model/ggml_type.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "test_paths.h"

namespace kvplan {
namespace {

// Rows x cols values of `type` as a file would store them: the legacy block types quantized from
// Gaussian values by the block math, the K-quants as random codes and sub-scales under small f16
// super-block scales (kvplan has no K-quant quantizer; any bytes with finite scales are valid).
std::vector<std::byte> stored_values(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  const size_t n = static_cast<size_t>(rows * cols);
  std::vector<std::byte> bytes(n / info->block_values * info->block_bytes);
  auto* out = reinterpret_cast<uint8_t*>(bytes.data());
  std::vector<float> x(n);
  for (float& v : x) v = gauss(rng);
  using Quantize = void (*)(const float*, uint8_t*);
  Quantize quantize = nullptr;
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(out, x.data(), n * 4);
      return bytes;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = type == GgmlType::kF16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return bytes;
    case GgmlType::kQ8_0:
      quantize = quantize_block_q8_0;
      break;
    case GgmlType::kQ4_0:
      quantize = quantize_block_q4_0;
      break;
    case GgmlType::kQ4_1:
      quantize = quantize_block_q4_1;
      break;
    case GgmlType::kQ5_0:
      quantize = quantize_block_q5_0;
      break;
    case GgmlType::kQ5_1:
      quantize = quantize_block_q5_1;
      break;
    default:
      break;
  }
  const size_t blocks = n / info->block_values;
  if (quantize != nullptr) {
    for (size_t b = 0; b < blocks; ++b) {
      quantize(x.data() + b * info->block_values, out + b * info->block_bytes);
    }
    return bytes;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : bytes) b = static_cast<std::byte>(byte(rng));
  // The f16 super-block scales: d and dmin first (Q4_K, Q5_K), d last (Q6_K).
  const std::vector<size_t> f16_fields =
      type == GgmlType::kQ6_K ? std::vector<size_t>{208} : std::vector<size_t>{0, 2};
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (size_t b = 0; b < blocks; ++b) {
    for (const size_t at : f16_fields) {
      const uint16_t h = f32_to_f16(scale(rng));
      std::memcpy(out + b * info->block_bytes + at, &h, 2);
    }
  }
  return bytes;
}

struct Stored {
  std::shared_ptr<std::vector<std::byte>> bytes;
  WeightMatrix matrix;
};

Stored make_stored(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  Stored s;
  s.bytes = std::make_shared<std::vector<std::byte>>(stored_values(type, rows, cols, seed));
  s.matrix = WeightMatrix::borrowed(type, *s.bytes, rows, cols, s.bytes, "test");
  return s;
}

// The reference: one single-threaded Eigen product over the whole dense matrix, x zero-padded to
// whole groups of four rows (the kernel's width, so no row takes its leftover path).
RowMatrix dense_product(const RowMatrix& x, const RowMatrix& w) {
  const SerialEigenScope serial;
  RowMatrix y(x.rows(), w.rows());
  if (x.rows() >= 4) {
    RowMatrix padded = RowMatrix::Zero((x.rows() + 3) / 4 * 4, x.cols());
    padded.topRows(x.rows()) = x;
    const RowMatrix all = padded * w.transpose();
    y = all.topRows(x.rows());
  } else {
    for (Eigen::Index o = 0; o < w.rows(); ++o)
      for (Eigen::Index q = 0; q < x.rows(); ++q) y(q, o) = w.row(o).dot(x.row(q));
  }
  return y;
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(compute_threads()) { set_compute_threads(n); }
  ~ThreadCount() { set_compute_threads(saved_); }

 private:
  int saved_;
};

const GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                           GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

TEST(WeightMatrix, ProductsEqualTheDenseProductForEveryStoredType) {
  // 1,000 rows: several tiles and a partial one; 512 columns: whole K-quant super-blocks.
  constexpr int64_t kRows = 1000, kCols = 512;
  uint32_t seed = 1;
  for (const GgmlType type : kTypes) {
    const std::string name(ggml_type_info(static_cast<uint32_t>(type))->name);
    const Stored w = make_stored(type, kRows, kCols, seed++);
    const RowMatrix dense = w.matrix.to_dense();
    ASSERT_TRUE(dense.allFinite()) << name;
    EXPECT_GT(dense.cwiseAbs().maxCoeff(), 0.0f) << name;
    for (const int64_t tokens : {1, 3, 4, 37}) {
      const RowMatrix x = RowMatrix::Random(tokens, kCols);
      RowMatrix y;
      matmul_transposed(x, w.matrix, y);
      const RowMatrix expected = dense_product(x, dense);
      ASSERT_EQ(y.rows(), tokens);
      ASSERT_EQ(y.cols(), kRows);
      EXPECT_EQ((y - expected).cwiseAbs().maxCoeff(), 0.0f) << name << ", " << tokens << " rows";
    }
  }
}

TEST(WeightMatrix, ResultsDoNotDependOnTheThreadCount) {
  const Stored w = make_stored(GgmlType::kQ4_K, 1200, 768, 7);
  for (const int64_t tokens : {2, 64}) {
    const RowMatrix x = RowMatrix::Random(tokens, 768);
    RowMatrix one, two;
    {
      const ThreadCount threads(1);
      matmul_transposed(x, w.matrix, one);
    }
    {
      const ThreadCount threads(2);
      matmul_transposed(x, w.matrix, two);
    }
    EXPECT_EQ((one - two).cwiseAbs().maxCoeff(), 0.0f) << tokens << " rows";
  }
}

TEST(WeightMatrix, ARowGetsTheSameBitsInAnyProductOfFourRowsOrMore) {
  // 512 columns: a width where the kernel's leftover rows do sum in another order.
  const Stored w = make_stored(GgmlType::kQ4_1, 300, 512, 9);
  const RowMatrix x = RowMatrix::Random(41, 512);
  RowMatrix all;
  matmul_transposed(x, w.matrix, all);
  for (const auto& [first, n] : {std::pair{0, 4}, {3, 5}, {7, 13}, {22, 19}, {30, 11}}) {
    RowMatrix part;
    matmul_transposed(x.middleRows(first, n), w.matrix, part);
    EXPECT_EQ((part - all.middleRows(first, n)).cwiseAbs().maxCoeff(), 0.0f)
        << "rows " << first << " + " << n;
  }
}

// Eigen plans with kvplan's cache sizes, not the ones this CPU reports, and the sizes do matter: a
// 576-deep product (SmolLM2's width) planned for another L1 cache adds its partial sums at other
// depths, which is how two CPUs chose different plans from the same build.
TEST(WeightMatrix, ProductsPlanWithFixedCacheSizesNotTheCpus) {
  EXPECT_EQ(Eigen::l1CacheSize(), kEigenPlanL1Bytes);
  EXPECT_EQ(Eigen::l2CacheSize(), kEigenPlanL2Bytes);
  EXPECT_EQ(Eigen::l3CacheSize(), kEigenPlanL3Bytes);
  const Stored w = make_stored(GgmlType::kF32, 96, 576, 11);
  const RowMatrix x = RowMatrix::Random(64, 576);
  RowMatrix fixed, other;
  matmul_transposed(x, w.matrix, fixed);
  Eigen::setCpuCacheSizes(48 * 1024, 2 * 1024 * 1024, 105 * 1024 * 1024);  // Sapphire Rapids
  matmul_transposed(x, w.matrix, other);
  EXPECT_TRUE(plan_eigen_products_with_fixed_cache_sizes());
  EXPECT_EQ(Eigen::l1CacheSize(), kEigenPlanL1Bytes);
  EXPECT_GT((fixed - other).cwiseAbs().maxCoeff(), 0.0f)
      << "the blocking no longer depends on the L1 size: the fixed sizes may be unnecessary";
  RowMatrix again;
  matmul_transposed(x, w.matrix, again);
  EXPECT_EQ((fixed - again).cwiseAbs().maxCoeff(), 0.0f);
}

TEST(WeightMatrix, StackedPartsKeepTheirOwnTypes) {
  // Q4_K_M files mix types inside one fused projection (Q and K in Q4_K, V in Q6_K).
  const Stored q = make_stored(GgmlType::kQ4_K, 130, 256, 11);
  const Stored k = make_stored(GgmlType::kQ6_K, 50, 256, 12);
  const Stored v = make_stored(GgmlType::kF16, 70, 256, 13);
  const WeightMatrix qkv = WeightMatrix::stacked({q.matrix, k.matrix, v.matrix});
  ASSERT_EQ(qkv.rows(), 250);
  ASSERT_EQ(qkv.cols(), 256);
  EXPECT_EQ(qkv.stored_bytes(),
            q.matrix.stored_bytes() + k.matrix.stored_bytes() + v.matrix.stored_bytes());
  RowMatrix expected(250, 256);
  expected << q.matrix.to_dense(), k.matrix.to_dense(), v.matrix.to_dense();
  EXPECT_EQ((qkv.to_dense() - expected).cwiseAbs().maxCoeff(), 0.0f);
  // Rows that straddle the part boundaries.
  RowMatrix middle(100, 256);
  qkv.dequantize_rows(120, 100, middle.data());
  EXPECT_EQ((middle - expected.middleRows(120, 100)).cwiseAbs().maxCoeff(), 0.0f);
  // Each part's columns of the product are that part's own product.
  const RowMatrix x = RowMatrix::Random(9, 256);
  RowMatrix y;
  matmul_transposed(x, qkv, y);
  Eigen::Index at = 0;
  for (const Stored* part : {&q, &k, &v}) {
    const RowMatrix own = dense_product(x, part->matrix.to_dense());
    EXPECT_EQ((y.middleCols(at, own.cols()) - own).cwiseAbs().maxCoeff(), 0.0f) << at;
    at += own.cols();
  }
  // The parts' bytes outlive the matrices they were made from.
  const WeightMatrix copy = [&] {
    const Stored temp = make_stored(GgmlType::kQ8_0, 40, 256, 14);
    return WeightMatrix::stacked({temp.matrix, v.matrix});
  }();
  EXPECT_TRUE(copy.to_dense().allFinite());
}

TEST(WeightMatrix, BytesThatDoNotFitTheShapeAreRefused) {
  auto bytes = std::make_shared<std::vector<std::byte>>(stored_values(GgmlType::kQ4_K, 4, 256, 3));
  const auto error_of = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of([&] {
              (void)WeightMatrix::borrowed(GgmlType::kQ4_K, *bytes, 8, 128, bytes, "m.gguf: t");
            }).find("m.gguf: t: [8, 128] of Q4_K does not hold whole 256-value blocks per row"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)WeightMatrix::borrowed(GgmlType::kQ4_K, *bytes, 5, 256, bytes, "m.gguf: t");
            }).find("needs 720 bytes, got 576"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)WeightMatrix::borrowed(GgmlType::kQ8_1, *bytes, 1, 32, bytes, "m.gguf: t");
            }).find("cannot be dequantized"),
            std::string::npos);
  RowMatrix out(2, 256);
  EXPECT_THROW(WeightMatrix::borrowed(GgmlType::kQ4_K, *bytes, 4, 256, bytes, "t")
                   .dequantize_rows(3, 2, out.data()),
               Error);
}

TEST(WeightMatrix, GgufMatricesStayInTheirStoredType) {
  const auto path = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(path, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const ModelWeights w = load_model_weights(path);
  std::map<std::string, uint64_t> file_bytes;
  for (const TensorSummary& t : w.tensors) file_bytes[t.name] = t.bytes;
  const LayerWeights& L = w.layers[1];
  EXPECT_EQ(L.wqkv.stored_bytes(), file_bytes["blk.1.attn_q.weight"] +
                                       file_bytes["blk.1.attn_k.weight"] +
                                       file_bytes["blk.1.attn_v.weight"]);
  EXPECT_EQ(L.w_down.stored_bytes(), file_bytes["blk.1.ffn_down.weight"]);
  EXPECT_EQ(w.token_embd.stored_bytes(), file_bytes["token_embd.weight"]);
}

}  // namespace
}  // namespace kvplan
