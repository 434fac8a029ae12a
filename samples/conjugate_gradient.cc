// Conjugate gradient in eager style on a dense symmetric positive definite system in f64
// (samples/numerics.cc). Prints the residual |b - A x| / |b| after each count of iterations.
//   conjugate_gradient [N] [ITERATIONS]      (default n = 2048, 15 iterations)
#include <cstdio>
#include <cstdlib>

#include "kiln/kiln.h"
#include "samples/numerics.h"

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 15;
  if (n < 1 || iterations < 0) {
    std::fprintf(stderr, "usage: conjugate_gradient [N >= 1] [ITERATIONS >= 0]\n");
    return 2;
  }
  using kiln::DType;
  using kiln::Tensor;
  kiln::Generator gen(2026);
  // A = M Mᵀ / n + I: symmetric, positive definite, well conditioned.
  const Tensor m = gen.randn({n, n}, DType::F64);
  const Tensor a =
      (kiln::matmul(m, m.transpose(0, 1)) / static_cast<double>(n) + Tensor::eye(n, DType::F64))
          .eval();
  const Tensor b = gen.rand({n}, DType::F64).eval();
  const Tensor x = samples::conjugate_gradient(a, b, iterations);
  const double residual = kiln::norm(b - kiln::matmul(a, x)).item() / kiln::norm(b).item();
  std::printf("conjugate_gradient: n = %lld, %d iterations: |b - A x| / |b| = %.3e\n",
              static_cast<long long>(n), iterations, residual);
  return 0;
}
