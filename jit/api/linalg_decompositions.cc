// kiln/linalg.h: each decomposition reads its operands to the host, runs Eigen's on every
// matrix of the batch, and returns computed tensors. Eigen is already the CPU device's GEMM
// core, so this adds no dependency; its decompositions are the ones LAPACK's drivers use.
#include <cmath>
#include <string>
#include <vector>

#include "Eigen/Cholesky"
#include "Eigen/Dense"
#include "Eigen/Eigenvalues"
#include "Eigen/QR"
#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "kiln/linalg.h"
#include "ops/value_type.h"

namespace kiln::linalg {
namespace {

template <class S>
using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The batch and matrix dims of `a` [..., rows, cols], after the checks every op makes.
struct Batch {
  std::vector<int64_t> dims;  // the leading dims
  int64_t count = 1;          // their product
  int64_t rows = 0, cols = 0;
};

Batch batch_of(const char* op, const Tensor& a, bool square) {
  if (a.dtype() != DType::F32 && a.dtype() != DType::F64) {
    throw Error(absl::StrCat("[linalg.", op, "] a is ", dtype_name(a.dtype()),
                             ops::format_shape(a.shape()), " (expected f32 or f64; use astype)"));
  }
  if (a.ndim() < 2 || (square && a.shape()[a.ndim() - 1] != a.shape()[a.ndim() - 2])) {
    throw Error(absl::StrCat("[linalg.", op, "] a is ", ops::format_shape(a.shape()),
                             square ? " (expected [..., n, n])" : " (expected [..., m, n])"));
  }
  Batch b;
  b.dims.assign(a.shape().begin(), a.shape().end() - 2);
  for (int64_t d : b.dims) b.count *= d;
  b.rows = a.shape()[a.ndim() - 2];
  b.cols = a.shape()[a.ndim() - 1];
  return b;
}

std::vector<int64_t> with_matrix(std::vector<int64_t> dims, std::vector<int64_t> matrix) {
  dims.insert(dims.end(), matrix.begin(), matrix.end());
  return dims;
}

template <class S>
using MatrixMap = Eigen::Map<const Matrix<S>>;

template <class S>
Tensor solve_as(const Tensor& a, const Tensor& b, const Batch& batch) {
  const int64_t n = batch.rows;
  const bool vector = b.ndim() == a.ndim() - 1;
  const int64_t k = vector ? 1 : b.shape().back();
  const std::vector<S> av = a.to_vector<S>(), bv = b.to_vector<S>();
  std::vector<S> out(bv.size());
  for (int64_t i = 0; i < batch.count; ++i) {
    const MatrixMap<S> m(av.data() + i * n * n, n, n);
    const Eigen::PartialPivLU<Matrix<S>> lu(m);
    const auto& u = lu.matrixLU();
    for (int64_t d = 0; d < n; ++d) {
      if (u(d, d) == S(0)) {
        throw Error(absl::StrCat("[linalg.solve] matrix ", i, " of a ",
                                 ops::format_shape(a.shape()), " is singular (pivot ", d,
                                 " is zero)"));
      }
    }
    Eigen::Map<Matrix<S>> x(out.data() + i * n * k, n, k);
    x = lu.solve(MatrixMap<S>(bv.data() + i * n * k, n, k));
    if (!x.allFinite() && m.allFinite() && MatrixMap<S>(bv.data() + i * n * k, n, k).allFinite()) {
      throw Error(absl::StrCat("[linalg.solve] matrix ", i, " of a ", ops::format_shape(a.shape()),
                               " is singular to working precision (the solution overflows)"));
    }
  }
  return Tensor::from_vector(out, b.shape());
}

template <class S>
Tensor cholesky_as(const Tensor& a, const Batch& batch) {
  const int64_t n = batch.rows;
  const std::vector<S> av = a.to_vector<S>();
  std::vector<S> out(av.size(), S(0));
  for (int64_t i = 0; i < batch.count; ++i) {
    const MatrixMap<S> m(av.data() + i * n * n, n, n);
    const Eigen::LLT<Matrix<S>, Eigen::Lower> llt(m);
    // LLT flags only a pivot <= 0: NaN or infinity would pass through into L.
    if (llt.info() != Eigen::Success || !m.allFinite()) {
      throw Error(absl::StrCat("[linalg.cholesky] matrix ", i, " of a ",
                               ops::format_shape(a.shape()),
                               " is not symmetric positive definite"));
    }
    Eigen::Map<Matrix<S>>(out.data() + i * n * n, n, n) = llt.matrixL();
  }
  return Tensor::from_vector(out, a.shape());
}

template <class S>
QR qr_as(const Tensor& a, const Batch& batch) {
  const int64_t m = batch.rows, n = batch.cols, k = std::min(m, n);
  const std::vector<S> av = a.to_vector<S>();
  std::vector<S> q(static_cast<size_t>(batch.count * m * k)), r(batch.count * k * n, S(0));
  for (int64_t i = 0; i < batch.count; ++i) {
    const Eigen::HouseholderQR<Matrix<S>> house(MatrixMap<S>(av.data() + i * m * n, m, n));
    Eigen::Map<Matrix<S>>(q.data() + i * m * k, m, k) =
        house.householderQ() * Matrix<S>::Identity(m, k);
    Eigen::Map<Matrix<S>>(r.data() + i * k * n, k, n) =
        house.matrixQR().topRows(k).template triangularView<Eigen::Upper>();
  }
  return {Tensor::from_vector(q, with_matrix(batch.dims, {m, k})),
          Tensor::from_vector(r, with_matrix(batch.dims, {k, n}))};
}

template <class S>
Eigh eigh_as(const Tensor& a, const Batch& batch) {
  const int64_t n = batch.rows;
  const std::vector<S> av = a.to_vector<S>();
  std::vector<S> values(static_cast<size_t>(batch.count * n)), vectors(av.size());
  for (int64_t i = 0; i < batch.count; ++i) {
    const Eigen::SelfAdjointEigenSolver<Matrix<S>> solver(
        MatrixMap<S>(av.data() + i * n * n, n, n));
    if (solver.info() != Eigen::Success) {
      throw Error(absl::StrCat("[linalg.eigh] matrix ", i, " of a ", ops::format_shape(a.shape()),
                               " did not converge (does it hold NaN or infinity?)"));
    }
    Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, 1>>(values.data() + i * n, n) =
        solver.eigenvalues();
    Eigen::Map<Matrix<S>>(vectors.data() + i * n * n, n, n) = solver.eigenvectors();
  }
  return {Tensor::from_vector(values, with_matrix(batch.dims, {n})),
          Tensor::from_vector(vectors, a.shape())};
}

}  // namespace

Tensor solve(const Tensor& a, const Tensor& b) {
  const Batch batch = batch_of("solve", a, true);
  const std::vector<int64_t> vector_shape = with_matrix(batch.dims, {batch.rows});
  const bool fits =
      b.shape() == vector_shape ||
      (b.ndim() == a.ndim() && std::vector<int64_t>(b.shape().begin(), b.shape().end() - 1) ==
                                   with_matrix(batch.dims, {batch.rows}));
  if (!fits || b.dtype() != a.dtype()) {
    throw Error(absl::StrCat("[linalg.solve] a ", dtype_name(a.dtype()),
                             ops::format_shape(a.shape()), " and b ", dtype_name(b.dtype()),
                             ops::format_shape(b.shape()),
                             " (expected b of a's dtype, shaped [..., n] or [..., n, k] with a's "
                             "batch dims)"));
  }
  return a.dtype() == DType::F32 ? solve_as<float>(a, b, batch) : solve_as<double>(a, b, batch);
}

Tensor cholesky(const Tensor& a) {
  const Batch batch = batch_of("cholesky", a, true);
  return a.dtype() == DType::F32 ? cholesky_as<float>(a, batch) : cholesky_as<double>(a, batch);
}

QR qr(const Tensor& a) {
  const Batch batch = batch_of("qr", a, false);
  return a.dtype() == DType::F32 ? qr_as<float>(a, batch) : qr_as<double>(a, batch);
}

Eigh eigh(const Tensor& a) {
  const Batch batch = batch_of("eigh", a, true);
  return a.dtype() == DType::F32 ? eigh_as<float>(a, batch) : eigh_as<double>(a, batch);
}

}  // namespace kiln::linalg
