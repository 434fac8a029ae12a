// Three numerical programs written the way a C++ numerics user writes them in eager style:
// a 2-D heat equation (a 5-point stencil), conjugate gradient on a dense SPD matrix, and
// k-means. The samples (heat.cc, conjugate_gradient.cc, kmeans.cc) run them;
// tests/samples/numerics_samples_test.cc checks them against plain loops; bench/numerics_bench.cc
// times them against Eigen.
#ifndef KILN_SAMPLES_NUMERICS_H_
#define KILN_SAMPLES_NUMERICS_H_

#include <cstdint>

#include "kiln/kiln.h"

namespace samples {

// `steps` explicit Euler steps of u_t = alpha * lap(u) on a square grid, the boundary held
// fixed: u[1:-1, 1:-1] += alpha * (u[:-2] + u[2:] + u[:, :-2] + u[:, 2:] - 4 u) inside.
kiln::Tensor heat(kiln::Tensor u, int steps, double alpha);

// `iterations` of conjugate gradient for A x = b from x = 0 (A symmetric positive definite,
// n x n; b of n). Scalars come back to C++ through item(), as one writes it.
kiln::Tensor conjugate_gradient(const kiln::Tensor& a, const kiln::Tensor& b, int iterations);

struct KMeans {
  kiln::Tensor centers;  // [k, d]
  kiln::Tensor labels;   // [n], I64: each point's nearest center after the last update
};
// `iterations` of Lloyd's k-means on points [n, d] from the given centers [k, d]: label
// each point with its nearest center, then move each center to the mean of its points (a
// center without points stays where it is).
KMeans kmeans(const kiln::Tensor& points, kiln::Tensor centers, int iterations);

}  // namespace samples

#endif  // KILN_SAMPLES_NUMERICS_H_
