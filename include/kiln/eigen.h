// Eigen matrices and vectors in and out of Kiln tensors. Optional: include it where Eigen's
// headers are available (nothing else in Kiln's public headers needs them).
//
// Kiln's tensors are row-major. Eigen's matrices are column-major unless declared with
// Eigen::RowMajor, and handing a column-major buffer to Tensor::from_vector or from_blob
// silently transposes it. So every function here says which order it takes:
//
//   kiln::eigen::borrow(m)     no copy: a tensor over m's own memory. Compiles only for
//                              row-major matrices and for vectors (a column-major matrix is
//                              a compile error that points to copy). m must outlive the
//                              tensor and stay unchanged while Kiln may read it
//                              (Tensor::from_blob's rules).
//   kiln::eigen::copy(m)       any matrix, array, vector or expression, in either order:
//                              one copy into row-major order, element (i, j) staying (i, j).
//   kiln::eigen::to_matrix<S>(t)
//                              a row-major Eigen matrix with t's values (a 1-D t gives one
//                              column); S must be t's element type.
//
// A vector gives a 1-D tensor; a matrix a 2-D one.
#ifndef KILN_EIGEN_H_
#define KILN_EIGEN_H_

#include <Eigen/Core>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln::eigen {

template <class S>
using RowMajorMatrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace detail {

template <class S>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<S, float>) return DType::F32;
  if constexpr (std::is_same_v<S, double>) return DType::F64;
  if constexpr (std::is_same_v<S, int32_t>) return DType::I32;
  if constexpr (std::is_same_v<S, int64_t>) return DType::I64;
  if constexpr (std::is_same_v<S, bool>) return DType::Bool;
  static_assert(std::is_same_v<S, float> || std::is_same_v<S, double> ||
                    std::is_same_v<S, int32_t> || std::is_same_v<S, int64_t> ||
                    std::is_same_v<S, bool>,
                "kiln::eigen: the scalar must be float, double, int32_t, int64_t or bool");
  return DType::F32;
}

template <class Derived>
std::vector<int64_t> shape_of(const Eigen::EigenBase<Derived>& m) {
  if constexpr (Derived::IsVectorAtCompileTime) return {static_cast<int64_t>(m.size())};
  return {static_cast<int64_t>(m.rows()), static_cast<int64_t>(m.cols())};
}

}  // namespace detail

// A tensor over m's memory, no copy (see above).
template <class Derived>
Tensor borrow(Eigen::PlainObjectBase<Derived>& m) {
  static_assert(Derived::IsRowMajor || Derived::IsVectorAtCompileTime,
                "kiln::eigen::borrow needs a row-major matrix (Eigen::RowMajor) or a vector: "
                "a column-major buffer read row-major is the transpose. Use kiln::eigen::copy.");
  using S = typename Derived::Scalar;
  return Tensor::from_blob(m.data(), detail::shape_of(m), detail::dtype_of<S>());
}

// A row-major copy of any Eigen matrix, array, vector or expression (see above).
template <class Derived>
Tensor copy(const Eigen::DenseBase<Derived>& m) {
  using S = typename Derived::Scalar;
  // The copy is the tensor's memory: it is freed when the last reference goes.
  auto* owned = new RowMajorMatrix<S>(m.rows(), m.cols());
  *owned = m.derived().matrix();
  return Tensor::from_blob(owned->data(), detail::shape_of(m), detail::dtype_of<S>(),
                           [owned](void*) { delete owned; });
}

// t's values as a row-major Eigen matrix (a sync point; see above).
template <class S>
RowMajorMatrix<S> to_matrix(const Tensor& t) {
  if (t.ndim() != 1 && t.ndim() != 2) {
    throw Error("[eigen::to_matrix] needs a 1-D or 2-D tensor");
  }
  const std::vector<S> values = t.to_vector<S>();  // checks S against t's dtype
  const int64_t rows = t.shape()[0], cols = t.ndim() == 2 ? t.shape()[1] : 1;
  RowMajorMatrix<S> out(rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) out.data()[i] = values[i];
  return out;
}

}  // namespace kiln::eigen

#endif  // KILN_EIGEN_H_
