// kiln::linalg (kiln/linalg.h): each decomposition checked by the identity that defines it,
// computed here in long double on fresh random matrices, every element, in f32 and f64 and
// over a batch; singular and indefinite matrices and bad operands as errors.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "jit/api/lapack.h"
#include "kiln/kiln.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using Values = std::vector<double>;

// Row-major [count, rows, cols] matrices.
long double at(const Values& m, int64_t b, int64_t rows, int64_t cols, int64_t i, int64_t j) {
  return m[(b * rows + i) * cols + j];
}

// count matrices [n, n], each A A^T + n I (symmetric positive definite).
Values spd(int64_t count, int64_t n, std::mt19937_64& rng) {
  const Values g = testing::random_doubles(count * n * n, rng);
  Values out(count * n * n);
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        long double s = i == j ? n : 0;
        for (int64_t k = 0; k < n; ++k) s += at(g, b, n, n, i, k) * at(g, b, n, n, j, k);
        out[(b * n + i) * n + j] = static_cast<double>(s);
      }
    }
  }
  return out;
}

double tolerance(DType dt) { return dt == DType::F32 ? 2e-4 : 1e-10; }

// `a` ([count, n, n]) with NaN above each diagonal: what an op that reads only the lower
// triangle must not notice.
Values with_nan_above_diagonal(Values a, int64_t count, int64_t n) {
  for (int64_t c = 0; c < count; ++c) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = i + 1; j < n; ++j) a[(c * n + i) * n + j] = std::nan("");
    }
  }
  return a;
}

class LinalgTest : public ::testing::TestWithParam<DType> {};

TEST_P(LinalgTest, SolveGivesAxEqualB) {
  const DType dt = GetParam();
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const int64_t count = 3, n = 7, k = 2;
  // Not symmetric (a solver that read a transposed would fail), and well conditioned.
  Values a = spd(count, n, rng);
  const Values skew = testing::random_doubles(count * n * n, rng);
  for (size_t e = 0; e < a.size(); ++e) a[e] += 0.5 * skew[e];
  const Values b = testing::random_doubles(count * n * k, rng);
  const Tensor x = linalg::solve(Tensor::from_vector(a, {count, n, n}).astype(dt),
                                 Tensor::from_vector(b, {count, n, k}).astype(dt));
  ASSERT_EQ(x.shape(), (std::vector<int64_t>{count, n, k}));
  const Values xv = testing::values(x);
  for (int64_t c = 0; c < count; ++c) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        long double ax = 0;
        for (int64_t d = 0; d < n; ++d) ax += at(a, c, n, n, i, d) * at(xv, c, n, k, d, j);
        EXPECT_NEAR(static_cast<double>(ax), at(b, c, n, k, i, j), tolerance(dt) * n)
            << c << " " << i << " " << j;
      }
    }
  }
  // One right-hand side as a vector.
  const Tensor one = linalg::solve(
      Tensor::from_vector(a, {count, n, n}).astype(dt),
      Tensor::from_vector(b, {count, n, k}).astype(dt).slice(2, 0, 1).reshape({count, n}));
  const Values ov = testing::values(one);
  for (int64_t e = 0; e < count * n; ++e) EXPECT_NEAR(ov[e], xv[e * k], tolerance(dt));
}

TEST_P(LinalgTest, CholeskyGivesLowerLTimesLTransposeEqualA) {
  const DType dt = GetParam();
  std::mt19937_64 rng(testing::test_seed() + 1);
  SCOPED_TRACE(testing::test_seed());
  const int64_t count = 2, n = 6;
  const Values a = spd(count, n, rng);
  const Values l = testing::values(linalg::cholesky(
      Tensor::from_vector(with_nan_above_diagonal(a, count, n), {count, n, n}).astype(dt)));
  for (int64_t c = 0; c < count; ++c) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        if (j > i) EXPECT_EQ(at(l, c, n, n, i, j), 0.0) << "above the diagonal";
        long double s = 0;
        for (int64_t d = 0; d < n; ++d) s += at(l, c, n, n, i, d) * at(l, c, n, n, j, d);
        EXPECT_NEAR(static_cast<double>(s), at(a, c, n, n, i, j), tolerance(dt) * n * n);
      }
    }
  }
}

TEST_P(LinalgTest, QrGivesOrthonormalQAndUpperRWithQrEqualA) {
  const DType dt = GetParam();
  std::mt19937_64 rng(testing::test_seed() + 2);
  SCOPED_TRACE(testing::test_seed());
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 4}, {4, 6}, {5, 5}}) {
    SCOPED_TRACE(testing::test_seed() + m * 10 + n);
    const int64_t count = 2, k = std::min(m, n);
    const Values a = testing::random_doubles(count * m * n, rng);
    const linalg::QR f = linalg::qr(Tensor::from_vector(a, {count, m, n}).astype(dt));
    ASSERT_EQ(f.q.shape(), (std::vector<int64_t>{count, m, k}));
    ASSERT_EQ(f.r.shape(), (std::vector<int64_t>{count, k, n}));
    const Values q = testing::values(f.q), r = testing::values(f.r);
    for (int64_t c = 0; c < count; ++c) {
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t j = 0; j < k; ++j) {
          long double s = 0;
          for (int64_t d = 0; d < m; ++d) s += at(q, c, m, k, d, i) * at(q, c, m, k, d, j);
          EXPECT_NEAR(static_cast<double>(s), i == j ? 1.0 : 0.0, tolerance(dt) * m);
        }
        for (int64_t j = 0; j < i && j < n; ++j) EXPECT_EQ(at(r, c, k, n, i, j), 0.0);
      }
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          long double s = 0;
          for (int64_t d = 0; d < k; ++d) s += at(q, c, m, k, i, d) * at(r, c, k, n, d, j);
          EXPECT_NEAR(static_cast<double>(s), at(a, c, m, n, i, j), tolerance(dt) * m);
        }
      }
    }
  }
}

TEST_P(LinalgTest, EighGivesAscendingValuesAndOrthonormalVectors) {
  const DType dt = GetParam();
  std::mt19937_64 rng(testing::test_seed() + 3);
  SCOPED_TRACE(testing::test_seed());
  const int64_t count = 2, n = 6;
  Values a = testing::random_doubles(count * n * n, rng);
  for (int64_t c = 0; c < count; ++c) {  // symmetric: the lower triangle mirrored
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = i + 1; j < n; ++j) a[(c * n + i) * n + j] = a[(c * n + j) * n + i];
    }
  }
  const linalg::Eigh e = linalg::eigh(
      Tensor::from_vector(with_nan_above_diagonal(a, count, n), {count, n, n}).astype(dt));
  ASSERT_EQ(e.eigenvalues.shape(), (std::vector<int64_t>{count, n}));
  const Values w = testing::values(e.eigenvalues), v = testing::values(e.eigenvectors);
  for (int64_t c = 0; c < count; ++c) {
    for (int64_t j = 0; j < n; ++j) {
      if (j > 0) EXPECT_LE(w[c * n + j - 1], w[c * n + j]) << "ascending";
      for (int64_t i = 0; i < n; ++i) {  // A v_j = w_j v_j
        long double s = 0;
        for (int64_t d = 0; d < n; ++d) s += at(a, c, n, n, i, d) * at(v, c, n, n, d, j);
        EXPECT_NEAR(static_cast<double>(s), w[c * n + j] * at(v, c, n, n, i, j),
                    tolerance(dt) * n * 4);
      }
      for (int64_t o = 0; o < n; ++o) {  // V^T V = I
        long double s = 0;
        for (int64_t d = 0; d < n; ++d) s += at(v, c, n, n, d, j) * at(v, c, n, n, d, o);
        EXPECT_NEAR(static_cast<double>(s), j == o ? 1.0 : 0.0, tolerance(dt) * n);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(F32AndF64, LinalgTest, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Linalg, BadMatricesAndOperandsAreErrorsThatNameThem) {
  const Tensor singular = Tensor::from_vector(std::vector<double>{1, 2, 2, 4}, {2, 2});  // rank one
  const Tensor b = Tensor::from_vector(std::vector<double>{1, 1}, {2});
  testing::expect_error([&] { linalg::solve(singular, b); }, {"[linalg.solve]", "singular"});
  testing::expect_error([&] { linalg::cholesky(singular); },
                        {"[linalg.cholesky]", "not symmetric positive definite"});
  testing::expect_error(
      [&] {
        linalg::cholesky(Tensor::from_vector(std::vector<double>{4, NAN, NAN, 4}, {2, 2}));
      },
      {"[linalg.cholesky]", "matrix 0"});
  testing::expect_error(
      [&] {
        linalg::solve(Tensor::ones({2, 3}, DType::F64), b);
      },
      {"[linalg.solve]", "[2, 3]", "[..., n, n]"});
  testing::expect_error([&] { linalg::solve(Tensor::eye(2, DType::F64), b.astype(DType::F32)); },
                        {"[linalg.solve]", "f32", "a's dtype"});
  testing::expect_error([&] { linalg::solve(Tensor::eye(3, DType::F64), b); },
                        {"[linalg.solve]", "[2]", "[..., n]"});
  testing::expect_error([&] { linalg::qr(Tensor::ones({4}, DType::F32)); },
                        {"[linalg.qr]", "[4]", "[..., m, n]"});
  testing::expect_error([&] { linalg::eigh(Tensor::eye(3, DType::I32)); },
                        {"[linalg.eigh]", "i32", "f32 or f64"});
  // The identity solves to b itself: the error above left nothing behind.
  EXPECT_EQ(linalg::solve(Tensor::eye(2, DType::F64), b).to_vector<double>(), (Values{1, 1}));
}

// syevd's workspace query is a count held in the value type: past 2^24 an f32 count rounds
// below what LAPACK then requires (n = 2895 needs 16779421 and the query says 16779420), so
// the size used is raised to LAPACK's documented minimum; sizes past 32 bits are refused.
TEST(Linalg, EighWorkspaceCoversLapacksMinimumWhereF32CountsRound) {
  const int64_t n = 2895, needed = 1 + 6 * n + 2 * n * n;
  const double rounded = static_cast<float>(needed);
  ASSERT_LT(rounded, static_cast<double>(needed));  // the rounding the query suffers
  const std::optional<linalg::lapack::SyevdWorkspace> sizes =
      linalg::lapack::syevd_workspace(static_cast<int>(n), rounded, 1);
  ASSERT_TRUE(sizes.has_value());
  EXPECT_EQ(sizes->work, needed);
  EXPECT_EQ(sizes->iwork, 3 + 5 * n);
  EXPECT_EQ(linalg::lapack::syevd_workspace(4, 1e6, 7)->work, 1000000);  // a larger ask stands
  EXPECT_FALSE(linalg::lapack::syevd_workspace(40000, 0, 1).has_value());
}

// LAPACK is opened on first use: after a decomposition, the library loaded is named; a path
// that does not load, or a library without LAPACK's routines, is an error naming the op, what
// was tried and what to install.
TEST(Linalg, LapackIsLoadedOnFirstUseAndMissingOnesAreNamed) {
  linalg::cholesky(Tensor::eye(3, DType::F64)).to_vector<double>();
  EXPECT_FALSE(linalg::lapack::library_path().empty());
  testing::expect_error(
      [] { linalg::lapack::open_library("solve", {"/nonexistent/liblapack-kiln-test.so"}); },
      {"[linalg.solve]", "none could be loaded", "/nonexistent/liblapack-kiln-test.so",
       "KILN_LAPACK_LIBRARY"});
  testing::expect_error([] { linalg::lapack::open_library("qr", {"libz.so.1"}); },
                        {"[linalg.qr]", "libz.so.1", "no LAPACK routine sgetrf_"});
  const linalg::lapack::Library library =
      linalg::lapack::open_library("eigh", {"/nonexistent/x.so", linalg::lapack::library_path()});
  EXPECT_EQ(library.path, linalg::lapack::library_path());
  EXPECT_NE(library.double_precision.syevd, nullptr);
}

}  // namespace
}  // namespace kiln
