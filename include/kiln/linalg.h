// kiln::linalg: the dense decompositions numerical code reaches for, on matrices in the last
// two dims (any leading dims are a batch). Each is a sync point: it computes its operands,
// runs the decomposition on the host with LAPACK (LU with partial pivoting, Cholesky,
// Householder QR, the divide-and-conquer symmetric eigensolver), one matrix after another,
// and returns computed tensors of the operand's dtype. f32 and f64 only. LAPACK is loaded
// on first use: OpenBLAS's where installed, else the reference one (KILN_LAPACK_LIBRARY
// names another); with none, the op is an error saying what to install. A GPU device runs
// them on the host too, its operands copied there and back (cuSOLVER is not wired in yet).
#ifndef KILN_LINALG_H_
#define KILN_LINALG_H_

#include "kiln/tensor.h"

namespace kiln::linalg {

// x with a @ x = b: a is [..., n, n]; b is [..., n] (one right-hand side) or [..., n, k],
// with a's batch dims. A singular a (an exact zero pivot, or a result that is not finite) is
// a kiln::Error.
Tensor solve(const Tensor& a, const Tensor& b);

// The lower-triangular L with a = L @ L^T, for a symmetric positive definite a [..., n, n]
// (only its lower triangle is read). Not positive definite: a kiln::Error.
Tensor cholesky(const Tensor& a);

// The reduced QR of a [..., m, n]: q [..., m, k] with orthonormal columns and r [..., k, n]
// upper triangular, a = q @ r, k = min(m, n) (numpy's mode "reduced"). Signs are LAPACK's
// (Householder reflections): r's diagonal may be negative.
struct QR {
  Tensor q;
  Tensor r;
};
QR qr(const Tensor& a);

// The eigenvalues of a symmetric a [..., n, n] in ascending order ([..., n]) and the
// eigenvectors as the columns of [..., n, n] (numpy.linalg.eigh; only the lower triangle is
// read). Each vector's sign is the solver's.
struct Eigh {
  Tensor eigenvalues;
  Tensor eigenvectors;
};
Eigh eigh(const Tensor& a);

}  // namespace kiln::linalg

#endif  // KILN_LINALG_H_
