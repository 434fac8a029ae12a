// Uses only the installed public headers: a compiled function, a custom elementwise
// function and a sync point. Prints "ok" when the values are right.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>

int main() {
  kiln::ElementwiseFunction twice;
  twice.name = "install_twice";
  twice.cuda = "__device__ float install_twice(float x) { return 2.0f * x; }";
  twice.cpu = [](int64_t n, const float* const* in, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * in[0][i];
  };
  kiln::CustomElementwise f = kiln::define_elementwise(twice);
  kiln::Compiled g = kiln::compile([&](const std::vector<kiln::Tensor>& in) {
    return std::vector{kiln::sum(f({in[0]}) + 1.0)};
  });
  bool right = true;
  for (float v : {1.0f, 2.5f}) {
    const double got = g({kiln::Tensor::full({4}, v)})[0].item();
    right = right && std::fabs(got - 4 * (2 * v + 1)) < 1e-6;
  }
  std::printf("%s\n", right ? "ok" : "wrong");
  return right ? 0 : 1;
}
