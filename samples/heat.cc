// A 2-D heat equation in eager style: a square plate, hot in the middle, its edges held at
// zero; explicit Euler steps of a 5-point stencil (samples/numerics.cc). Prints the heat
// left on the plate and the peak temperature.
//   heat [N] [STEPS]      (default 1024 x 1024, 500 steps)
#include <cstdio>
#include <cstdlib>

#include "kiln/kiln.h"
#include "samples/numerics.h"

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1024;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 500;
  if (n < 3 || steps < 0) {
    std::fprintf(stderr, "usage: heat [N >= 3] [STEPS >= 0]\n");
    return 2;
  }
  // 1 on the middle third of the plate (whole cells), 0 elsewhere.
  const kiln::Tensor x = kiln::Tensor::arange(n).reshape({n, 1});
  const kiln::Tensor y = kiln::Tensor::arange(n).reshape({1, n});
  const int64_t first = n / 3, end = 2 * n / 3;
  auto middle = [&](const kiln::Tensor& t) {
    return kiln::logical_and(t >= static_cast<double>(first), t < static_cast<double>(end));
  };
  const kiln::Tensor u0 = kiln::logical_and(middle(x), middle(y)).astype(kiln::DType::F32);
  const kiln::Tensor u = samples::heat(u0, steps, 0.2);
  std::printf("heat: %lld x %lld plate, %d steps: total heat %.6f (from %.6f), peak %.6f\n",
              static_cast<long long>(n), static_cast<long long>(n), steps, u.sum().item(),
              u0.sum().item(), u.max().item());
  return 0;
}
