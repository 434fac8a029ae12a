// tril and triu: every element against the definition, for diagonals below, on and above
// the main one (and past the matrix), batched, in several dtypes; fused into one kernel;
// clear errors.
#include <random>

#include "kiln/kiln.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// x[b, i, j] kept where keep(j - i), else 0, checked against kiln's result for every element.
void expect_triangle(const std::vector<double>& x, const std::vector<double>& got, int64_t batch,
                     int64_t rows, int64_t cols, bool lower, int64_t k) {
  ASSERT_EQ(got.size(), x.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t e = (b * rows + i) * cols + j;
        const bool keep = lower ? j - i <= k : j - i >= k;
        EXPECT_EQ(got[e], keep ? x[e] : 0.0) << "at " << b << "," << i << "," << j << " k=" << k;
      }
    }
  }
}

TEST(Triangle, TrilAndTriuMatchTheDefinitionForEveryDiagonal) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const int64_t batch = 2, rows = 5, cols = 7;
  const std::vector<float> xs = testing::random_floats(batch * rows * cols, rng);
  const std::vector<double> x(xs.begin(), xs.end());
  Tensor t = Tensor::from_vector(xs, {batch, rows, cols});
  for (int64_t k : {-6, -2, -1, 0, 1, 3, 8}) {
    expect_triangle(x, testing::values(tril(t, k)), batch, rows, cols, true, k);
    expect_triangle(x, testing::values(triu(t, k)), batch, rows, cols, false, k);
  }
  // Integers and halves keep their dtype and values.
  for (DType dt : {DType::I32, DType::F16, DType::Bool}) {
    Tensor c = t.astype(dt);
    const std::vector<double> cv = testing::values(c);
    Tensor lower = tril(c, 1);
    EXPECT_EQ(lower.dtype(), dt);
    expect_triangle(cv, testing::values(lower), batch, rows, cols, true, 1);
    expect_triangle(cv, testing::values(triu(c, -1)), batch, rows, cols, false, -1);
  }
}

TEST(Triangle, FusesWithItsProducerAndConsumer) {
  Tensor x = Tensor::rand({4, 4}, 7);
  Tensor y = exp(tril(x * 2.0)) + 1.0;
  reset_stats();
  const std::vector<float> got = y.to_vector<float>();
  EXPECT_EQ(stats().kernels_launched, 1);
  const std::vector<float> xv = x.to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const float want = std::exp(j <= i ? xv[i * 4 + j] * 2.0f : 0.0f) + 1.0f;
      EXPECT_NEAR(got[i * 4 + j], want, 1e-5f * want);
    }
  }
}

TEST(Triangle, RankBelowTwoIsAClearError) {
  testing::expect_error([] { tril(Tensor::zeros({3})); }, {"[tril]", "rank >= 2", "f32[3]"});
  testing::expect_error([] { triu(Tensor::zeros({})); }, {"[triu]", "rank >= 2"});
  testing::expect_error([] { triu(Tensor()); }, {"[triu]", "empty"});
}

}  // namespace
}  // namespace kiln
