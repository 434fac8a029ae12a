// The three numerical programs of samples/numerics.h, in Kiln's eager style: no eval() in
// the loops; values are computed when C++ reads them (item()) or the caller does.
#include "samples/numerics.h"

#include <utility>
#include <vector>

namespace samples {

using kiln::Slice;
using kiln::Tensor;

Tensor heat(Tensor u, int steps, double alpha) {
  const int64_t n = u.shape()[0], m = u.shape()[1];
  const Slice in(1, -1), before(0, -2), after_rows(2, n), after_cols(2, m);
  // Two grids, as one writes it with Eigen: each step writes the next grid's interior from
  // the current grid, then the two swap. The boundary, the same in both, is never written;
  // the interior is written in place, since nothing else holds the grid being written.
  Tensor next = u;
  for (int s = 0; s < steps; ++s) {
    const Tensor center = u.index({in, in});
    const Tensor lap = u.index({before, in}) + u.index({after_rows, in}) + u.index({in, before}) +
                       u.index({in, after_cols}) - 4.0 * center;
    next = kiln::update_slice(next, center + alpha * lap, {1, 1});
    std::swap(u, next);
  }
  return u;
}

Tensor conjugate_gradient(const Tensor& a, const Tensor& b, int iterations) {
  Tensor x = Tensor::zeros(b.shape(), b.dtype());
  Tensor r = b;
  Tensor p = r;
  double rr = kiln::dot(r, r).item();
  for (int i = 0; i < iterations; ++i) {
    const Tensor ap = kiln::matmul(a, p);
    const double step = rr / kiln::dot(p, ap).item();
    x += step * p;
    r -= step * ap;
    const double rr_next = kiln::dot(r, r).item();
    p = r + (rr_next / rr) * p;
    rr = rr_next;
  }
  return x;
}

KMeans kmeans(const Tensor& points, Tensor centers, int iterations) {
  const int64_t k = centers.shape()[0];
  Tensor labels;
  for (int i = 0; i <= iterations; ++i) {
    // Squared distances [n, k] by broadcasting, the nearest center per point.
    const Tensor d2 = kiln::sum(kiln::square(points.unsqueeze(1) - centers.unsqueeze(0)), 2);
    labels = kiln::argmin(d2, 1);
    if (i == iterations) break;
    // The points' sums and counts per center.
    const Tensor sums = kiln::segment_sum(points, labels, k);
    const Tensor counts = kiln::bincount(labels, k).astype(points.dtype()).unsqueeze(1);
    centers = kiln::where(counts > 0.0, sums / kiln::maximum(counts, 1.0), centers);
  }
  return {centers, labels};
}

}  // namespace samples
