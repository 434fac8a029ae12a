// kiln/linalg.h: each decomposition reads its operands to the host and runs LAPACK's
// routines (OpenBLAS's where installed, jit/api/lapack.h) on every matrix of the batch, then
// returns computed tensors. LAPACK is column-major and Kiln row-major: a row-major buffer read
// column-major is the matrix transposed, which the symmetric routines and LU (solving with
// the transpose) take as it is, and which QR transposes first.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/api/lapack.h"
#include "kiln/error.h"
#include "kiln/linalg.h"
#include "ops/value_type.h"

namespace kiln::linalg {
namespace {

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
  constexpr int64_t kLargest = std::numeric_limits<int>::max();  // LAPACK's 32-bit sizes
  if (a.shape()[a.ndim() - 1] > kLargest || a.shape()[a.ndim() - 2] > kLargest ||
      a.shape()[a.ndim() - 1] * a.shape()[a.ndim() - 2] > kLargest) {
    throw Error(absl::StrCat("[linalg.", op, "] a is ", ops::format_shape(a.shape()),
                             " (expected matrices of at most 2^31 - 1 elements)"));
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
bool all_finite(const S* values, int64_t count) {
  return std::all_of(values, values + count, [](S v) { return std::isfinite(v); });
}

// The [cols, rows] row-major transpose of `rows` x `cols` values: the same matrix,
// column-major.
template <class S>
std::vector<S> transposed(const S* values, int64_t rows, int64_t cols) {
  std::vector<S> out(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = values[i * cols + j];
  }
  return out;
}

// LAPACK's INFO from `routine` when it is not negative; a negative INFO names an argument
// the routine rejected, which Kiln's checks before each call rule out.
int checked(const char* op, const char* routine, int info) {
  if (info < 0) {
    throw Error(absl::StrCat("[linalg.", op, "] LAPACK's ", routine, " rejected its argument ",
                             -info, " (a bug in Kiln: please report it)"));
  }
  return info;
}

// A row-major a is A^T to LAPACK: getrf factors A^T, and getrs with 'T' solves
// (A^T)^T x = A x = b, b column-major.
template <class S>
Tensor solve_as(const Tensor& a, const Tensor& b, const Batch& batch) {
  const int n = static_cast<int>(batch.rows);
  const bool vector = b.ndim() == a.ndim() - 1;
  const int k = vector ? 1 : static_cast<int>(b.shape().back());
  std::vector<S> av = a.to_vector<S>();
  const std::vector<S> bv = b.to_vector<S>();
  std::vector<S> out(bv.size());
  std::vector<int> pivots(std::max(1, n));
  for (int64_t i = 0; i < batch.count; ++i) {
    S* m = av.data() + i * n * n;
    const S* rhs = bv.data() + i * n * k;
    const bool finite = all_finite(m, int64_t{n} * n) && all_finite(rhs, int64_t{n} * k);
    if (n == 0) continue;
    if (const int info = checked("solve", "getrf", lapack::getrf(n, n, m, n, pivots.data()));
        info > 0) {
      throw Error(absl::StrCat("[linalg.solve] matrix ", i, " of a ", ops::format_shape(a.shape()),
                               " is singular (pivot ", info - 1, " is zero)"));
    }
    if (k == 0) continue;
    std::vector<S> x = transposed(rhs, n, k);  // column-major
    checked("solve", "getrs", lapack::getrs('T', n, k, m, n, pivots.data(), x.data(), n));
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < k; ++c) out[(i * n + r) * k + c] = x[c * n + r];
    }
    if (finite && !all_finite(out.data() + i * n * k, int64_t{n} * k)) {
      throw Error(absl::StrCat("[linalg.solve] matrix ", i, " of a ", ops::format_shape(a.shape()),
                               " is singular to working precision (the solution overflows)"));
    }
  }
  return Tensor::from_vector(out, b.shape());
}

// a's lower triangle, row-major, is the upper one to LAPACK: potrf('U') gives U with
// A = U^T U, which read row-major is L.
template <class S>
Tensor cholesky_as(const Tensor& a, const Batch& batch) {
  const int n = static_cast<int>(batch.rows);
  std::vector<S> av = a.to_vector<S>();
  for (int64_t i = 0; i < batch.count; ++i) {
    S* m = av.data() + i * n * n;
    bool finite = true;  // the lower triangle, which is all that is read
    for (int r = 0; r < n; ++r) finite = finite && all_finite(m + r * n, r + 1);
    // potrf flags a pivot <= 0; NaN or infinity could pass through into L.
    if (!finite || (n > 0 && checked("cholesky", "potrf", lapack::potrf('U', n, m, n)) != 0)) {
      throw Error(absl::StrCat("[linalg.cholesky] matrix ", i, " of a ",
                               ops::format_shape(a.shape()),
                               " is not symmetric positive definite"));
    }
    for (int r = 0; r < n; ++r) std::fill(m + r * n + r + 1, m + (r + 1) * n, S(0));
  }
  return Tensor::from_vector(av, a.shape());
}

// geqrf on a copy of each matrix made column-major; r is its upper triangle, q what orgqr
// builds from the reflectors in its place.
template <class S>
QR qr_as(const Tensor& a, const Batch& batch) {
  const int m = static_cast<int>(batch.rows), n = static_cast<int>(batch.cols);
  const int k = std::min(m, n);
  const std::vector<S> av = a.to_vector<S>();
  std::vector<S> q(static_cast<size_t>(batch.count * m * k)), r(batch.count * k * n, S(0));
  std::vector<S> tau(std::max(1, k));
  for (int64_t i = 0; i < batch.count && k > 0; ++i) {
    std::vector<S> c = transposed(av.data() + i * m * n, m, n);  // column-major, lda m
    S best[2] = {0, 0};  // the workspace sizes the two routines ask for
    checked("qr", "geqrf", lapack::geqrf(m, n, c.data(), m, tau.data(), &best[0], -1));
    checked("qr", "orgqr", lapack::orgqr(m, k, k, c.data(), m, tau.data(), &best[1], -1));
    // At least n (each routine's minimum), whatever an f32 count rounded to.
    const int size = std::max({1, n, static_cast<int>(std::ceil(std::max(best[0], best[1])))});
    std::vector<S> work(size);
    checked("qr", "geqrf", lapack::geqrf(m, n, c.data(), m, tau.data(), work.data(), size));
    for (int row = 0; row < k; ++row) {
      for (int col = row; col < n; ++col) r[(i * k + row) * n + col] = c[col * m + row];
    }
    checked("qr", "orgqr", lapack::orgqr(m, k, k, c.data(), m, tau.data(), work.data(), size));
    for (int row = 0; row < m; ++row) {
      for (int col = 0; col < k; ++col) q[(i * m + row) * k + col] = c[col * m + row];
    }
  }
  return {Tensor::from_vector(q, with_matrix(batch.dims, {m, k})),
          Tensor::from_vector(r, with_matrix(batch.dims, {k, n}))};
}

// a's lower triangle, row-major, is the upper one to LAPACK; syevd leaves the eigenvectors
// as the columns of a column-major matrix, transposed into place.
template <class S>
Eigh eigh_as(const Tensor& a, const Batch& batch) {
  const int n = static_cast<int>(batch.rows);
  std::vector<S> av = a.to_vector<S>();
  std::vector<S> values(static_cast<size_t>(batch.count * n)), vectors(av.size());
  for (int64_t i = 0; i < batch.count && n > 0; ++i) {
    S* m = av.data() + i * n * n;
    bool finite = true;  // the lower triangle, which is all that is read
    for (int r = 0; r < n; ++r) finite = finite && all_finite(m + r * n, r + 1);
    S best_work = 0;
    int best_iwork = 0;
    checked(
        "eigh", "syevd",
        lapack::syevd('V', 'U', n, m, n, values.data() + i * n, &best_work, -1, &best_iwork, -1));
    const std::optional<lapack::SyevdWorkspace> sizes =
        lapack::syevd_workspace(n, static_cast<double>(best_work), best_iwork);
    if (!sizes) {
      throw Error(absl::StrCat("[linalg.eigh] a is ", ops::format_shape(a.shape()),
                               " (expected n small enough for LAPACK's 32-bit workspace of 1 + "
                               "6n + 2n^2 elements: at most 32766)"));
    }
    std::vector<S> work(sizes->work);
    std::vector<int> iwork(sizes->iwork);
    if (!finite || checked("eigh", "syevd",
                           lapack::syevd('V', 'U', n, m, n, values.data() + i * n, work.data(),
                                         sizes->work, iwork.data(), sizes->iwork)) != 0) {
      throw Error(absl::StrCat("[linalg.eigh] matrix ", i, " of a ", ops::format_shape(a.shape()),
                               finite ? " did not converge" : " holds NaN or infinity"));
    }
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) vectors[(i * n + r) * n + c] = m[c * n + r];
    }
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
  const int64_t k = b.ndim() == a.ndim() ? b.shape().back() : 1;
  if (k * std::max<int64_t>(1, batch.rows) > std::numeric_limits<int>::max()) {
    throw Error(absl::StrCat("[linalg.solve] b is ", ops::format_shape(b.shape()),
                             " (expected at most 2^31 - 1 elements per matrix)"));
  }
  lapack::load("solve");
  return a.dtype() == DType::F32 ? solve_as<float>(a, b, batch) : solve_as<double>(a, b, batch);
}

Tensor cholesky(const Tensor& a) {
  const Batch batch = batch_of("cholesky", a, true);
  lapack::load("cholesky");
  return a.dtype() == DType::F32 ? cholesky_as<float>(a, batch) : cholesky_as<double>(a, batch);
}

QR qr(const Tensor& a) {
  const Batch batch = batch_of("qr", a, false);
  lapack::load("qr");
  return a.dtype() == DType::F32 ? qr_as<float>(a, batch) : qr_as<double>(a, batch);
}

Eigh eigh(const Tensor& a) {
  const Batch batch = batch_of("eigh", a, true);
  lapack::load("eigh");
  return a.dtype() == DType::F32 ? eigh_as<float>(a, batch) : eigh_as<double>(a, batch);
}

}  // namespace kiln::linalg
