// The first program to run: a small eager computation, its trace, and its result.
//
// Nothing is computed while the ops are written; the trace is printed before the first
// sync point, and to_vector() computes everything at once.
#include <cstdio>
#include <vector>

#include "kiln/kiln.h"

int main() {
  using kiln::Tensor;
  // A tiny dense layer: y = relu(x @ w + b), then a softmax over the outputs.
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = Tensor::from_vector<float>({0.5f, -1, 0.25f, 1, -0.5f, 0.75f}, {3, 2});
  Tensor b = Tensor::from_vector<float>({0.1f, -0.2f}, {2});
  Tensor h = kiln::relu(kiln::matmul(x, w) + b);
  Tensor p = kiln::softmax(h * 0.5, -1);
  Tensor total = kiln::sum(p, {1});

  std::printf("== trace (nothing computed yet) ==\n%s\n",
              kiln::dump_trace({p, total}, kiln::DumpFormat::Text).c_str());

  kiln::eval({p, total});  // one sync point for both outputs
  std::vector<float> probs = p.to_vector<float>();
  std::vector<float> sums = total.to_vector<float>();
  std::printf("== result ==\n");
  for (int row = 0; row < 2; ++row) {
    std::printf("row %d: p = [%.4f, %.4f], sum = %.4f\n", row, probs[row * 2], probs[row * 2 + 1],
                sums[row]);
  }
  kiln::Stats s = kiln::stats();
  std::printf(
      "== stats ==\nsyncs %lld, plans built %lld, kernels compiled %lld, kernels launched %lld\n",
      static_cast<long long>(s.syncs), static_cast<long long>(s.plans_built),
      static_cast<long long>(s.kernels_compiled), static_cast<long long>(s.kernels_launched));
  return 0;
}
