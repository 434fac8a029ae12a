// Block-quantized weights as operands (docs/quantization.md): matmul's b, linear's w,
// embedding's table and the row views of each, checked against the f64 product of the
// dequantized weight (within the accuracy contract of docs/contracts.md) and against the
// reference evaluator, for every block format; and the errors for everything else.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/kiln.h"
#include "tests/quantized_util.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::quantized_product_bound;

// y [rows, n] against x [rows, k] times w [n, k] transposed (exact, in double).
void expect_product(const Tensor& y, const std::vector<float>& x, const std::vector<float>& w,
                    int64_t rows, int64_t n, int64_t k) {
  const std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(static_cast<int64_t>(got.size()), rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (int64_t i = 0; i < k; ++i) exact += static_cast<double>(x[r * k + i]) * w[j * k + i];
      const double tolerance = quantized_product_bound(&x[r * k], &w[j * k], k);
      ASSERT_LE(std::fabs(got[r * n + j] - exact), tolerance)
          << "row " << r << " column " << j << ": " << got[r * n + j] << " vs " << exact;
    }
  }
}

class QuantizedWeights : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizedWeights, MatmulLinearAndEmbeddingReadTheDequantizedWeight) {
  const DType format = GetParam();
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  // 21 rows: the CPU's panel kernel (16 rows and more); one row below: its direct kernel.
  const int64_t n = 40, k = 2 * block_values(format), rows = 21;
  const Tensor w = testing::random_block_tensor(format, {n, k}, rng);
  const std::vector<float> wf = w.astype(DType::F32).to_vector<float>();
  const std::vector<float> x = testing::random_floats(rows * k, rng);
  const Tensor xt = Tensor::from_vector(x, {3, 7, k});

  // matmul with the transposed weight, over leading axes; and linear with a bias.
  expect_product(matmul(xt, w.transpose(0, 1)).reshape({rows, n}), x, wf, rows, n, k);
  const std::vector<float> bias = testing::random_floats(n, rng);
  const Tensor b = Tensor::from_vector(bias, {n});
  const std::vector<float> plain = matmul(xt, w.transpose(0, 1)).to_vector<float>();
  const std::vector<float> with_bias = linear(xt, w, b).to_vector<float>();
  for (int64_t e = 0; e < rows * n; ++e) {
    ASSERT_EQ(with_bias[e], plain[e] + bias[e % n]) << e;
  }

  // A fused epilogue (bias, gelu, a residual) against the reference evaluator.
  const Tensor residual = Tensor::from_vector(testing::random_floats(rows * n, rng), {3, 7, n});
  const Tensor fused = gelu(linear(xt, w, b)) + residual;
  const std::vector<float> got = fused.to_vector<float>();
  const std::vector<float> want = testing::reference_tensor(fused).to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      const double tolerance = 1.2 * quantized_product_bound(&x[r * k], &wf[j * k], k) + 1e-6;
      ASSERT_NEAR(got[r * n + j], want[r * n + j], tolerance) << r << ", " << j;
    }
  }

  // A matrix-vector product (one row) and embedding rows, which decode exactly.
  expect_product(matmul(xt.reshape({rows, k}).slice(0, 4, 5), w.transpose(0, 1)),
                 std::vector<float>(x.begin() + 4 * k, x.begin() + 5 * k), wf, 1, n, k);
  const std::vector<int32_t> ids = {3, 0, 39, 3, 17};
  const std::vector<float> rows_got =
      embedding(w, Tensor::from_vector(ids, {5})).to_vector<float>();
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t i = 0; i < k; ++i) ASSERT_EQ(rows_got[r * k + i], wf[ids[r] * k + i]);
  }
}

TEST_P(QuantizedWeights, RowViewsKeepTheirBlocks) {
  const DType format = GetParam();
  std::mt19937_64 rng(testing::test_seed());
  const int64_t k = block_values(format);
  const Tensor w = testing::random_block_tensor(format, {4, 10, k}, rng);
  const std::vector<float> wf = w.astype(DType::F32).to_vector<float>();
  auto rows_of = [&](const std::vector<int64_t>& picked) {
    std::vector<float> out;
    for (int64_t r : picked) out.insert(out.end(), wf.begin() + r * k, wf.begin() + (r + 1) * k);
    return out;
  };
  // Rows that lie together share the weight's bytes; others are copied; both stay realized.
  const Tensor flat = w.reshape({40, k});
  EXPECT_TRUE(flat.is_realized());
  EXPECT_EQ(flat.dtype(), format);
  const Tensor together = flat.slice(0, 8, 24);
  EXPECT_TRUE(together.is_realized());
  EXPECT_EQ(together.astype(DType::F32).to_vector<float>(),
            rows_of({8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}));
  const Tensor strided = w.slice(1, 1, 10, 4);  // rows 1, 5, 9 of each of the 4
  EXPECT_TRUE(strided.is_realized());
  EXPECT_EQ(strided.shape(), (std::vector<int64_t>{4, 3, k}));
  EXPECT_EQ(strided.astype(DType::F32).to_vector<float>(),
            rows_of({1, 5, 9, 11, 15, 19, 21, 25, 29, 31, 35, 39}));
  const Tensor backward = flat.slice(0, 39, 30, -3);  // rows 39, 36, 33
  EXPECT_EQ(backward.astype(DType::F32).to_vector<float>(), rows_of({39, 36, 33}));
  // A slice of the transposed weight stays a view that only its matmul reads.
  const std::vector<float> x = testing::random_floats(2 * k, rng);
  const Tensor xt = Tensor::from_vector(x, {2, k});
  const std::vector<float> some =
      matmul(xt, flat.transpose(0, 1).slice(1, 5, 12)).to_vector<float>();
  const std::vector<float> all = matmul(xt, flat.transpose(0, 1)).to_vector<float>();
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t j = 0; j < 7; ++j) {
      EXPECT_NEAR(some[r * 7 + j], all[r * 40 + 5 + j],
                  quantized_product_bound(&x[r * k], &wf[(5 + j) * k], k));
    }
  }
}

TEST_P(QuantizedWeights, EveryOtherUseIsAnErrorThatSaysToAstype) {
  const DType format = GetParam();
  std::mt19937_64 rng(testing::test_seed());
  const int64_t k = block_values(format);
  const Tensor w = testing::random_block_tensor(format, {6, k}, rng);
  const std::vector<float> before = w.astype(DType::F32).to_vector<float>();
  const Tensor x = Tensor::ones({2, k});
  const std::string name = dtype_name(format);
  testing::expect_error([&] { (void)(w + 1.0); }, {"[add]", name, "astype"});
  testing::expect_error([&] { (void)sum(w); }, {"[sum]", name, "astype"});
  testing::expect_error([&] { (void)exp(w); }, {"[exp]", name, "astype"});
  testing::expect_error([&] { (void)w.slice(1, 0, k / 2); }, {"[slice]", "last axis", "astype"});
  testing::expect_error([&] { (void)w.reshape({6 * k}); }, {"[reshape]", "last axis", "astype"});
  testing::expect_error(
      [&] { (void)take(w, Tensor::from_vector(std::vector<int32_t>{0}, {1}), 1); },
      {"[take]", "last axis"});
  testing::expect_error([&] { (void)matmul(w, x.transpose(0, 1)); }, {"[matmul]", "weight b"});
  testing::expect_error([&] { (void)w.broadcast_to({2, 6, k}); }, {"[broadcast_to]", name});
  testing::expect_error([&] { (void)w.transpose(0, 1).astype(DType::F32); },
                        {"cannot store", name, "astype"});
  testing::expect_error([&] { (void)w.transpose(0, 1).eval(); }, {"cannot store", name});
  // w is unchanged, and still works.
  EXPECT_EQ(w.astype(DType::F32).to_vector<float>(), before);
  EXPECT_EQ(matmul(x, w.transpose(0, 1)).shape(), (std::vector<int64_t>{2, 6}));
}

INSTANTIATE_TEST_SUITE_P(EveryBlockFormat, QuantizedWeights,
                         ::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                           DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kiln
