// Batch inference with a 2-layer MLP whose weights come from a .safetensors file.
//
//   python3 scripts/make_mlp_weights.py mlp.safetensors
//   build/samples/mlp_inference mlp.safetensors
//
// It runs the same forward pass two ways: eagerly (every call records the ops, finds the
// cached plan and runs it) and through kiln::compile (the first call records; later calls
// only bind the new batch to the recorded plan). Both give identical numbers; the compiled
// one spends less host time per call.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace {

using kiln::Tensor;

// The forward pass; the weights are captured, so they are constants of a compiled call.
struct Mlp {
  Tensor w1, b1, w2, b2;
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    Tensor hidden = kiln::relu(kiln::matmul(in[0], w1) + b1);
    return {kiln::softmax(kiln::matmul(hidden, w2) + b2)};
  }
};

Mlp load_mlp(const std::string& path) {
  std::map<std::string, Tensor> w = kiln::load_safetensors(path);
  for (const char* name : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}) {
    if (!w.contains(name)) throw kiln::Error(path + " has no tensor named " + name);
  }
  return Mlp{w["fc1.weight"], w["fc1.bias"], w["fc2.weight"], w["fc2.bias"]};
}

// Mean microseconds per call of `call` over `n` calls (after one warm-up call).
template <class F>
double micros_per_call(int n, F&& call) {
  call();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) call();
  const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
  return took.count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s WEIGHTS.safetensors (make one: %s)\n", argv[0],
                 "python3 scripts/make_mlp_weights.py mlp.safetensors");
    return 2;
  }
  try {
    const Mlp mlp = load_mlp(argv[1]);
    const int64_t features = mlp.w1.shape()[0];
    std::printf("loaded %s: %lld -> %lld -> %lld\n", argv[1], static_cast<long long>(features),
                static_cast<long long>(mlp.w1.shape()[1]),
                static_cast<long long>(mlp.w2.shape()[1]));

    kiln::Compiled forward = kiln::compile(mlp);
    const Tensor batch = Tensor::randn({32, features}, /*seed=*/7).eval();
    const std::vector<float> eager = mlp({batch})[0].to_vector<float>();
    const std::vector<float> compiled = forward({batch})[0].to_vector<float>();
    std::printf("eager and compiled outputs identical: %s\n", eager == compiled ? "yes" : "NO");

    const int64_t classes = mlp.w2.shape()[1];
    for (int row = 0; row < 4; ++row) {
      int best = 0;
      for (int c = 1; c < classes; ++c) {
        if (eager[row * classes + c] > eager[row * classes + best]) best = c;
      }
      std::printf("row %d: class %d (p = %.3f)\n", row, best, eager[row * classes + best]);
    }

    // Host overhead is what compile removes, so time a small batch.
    const Tensor one = Tensor::randn({1, features}, 8).eval();
    const double eager_us = micros_per_call(2000, [&] { mlp({one})[0].eval(); });
    const double compiled_us = micros_per_call(2000, [&] { forward({one}); });
    std::printf("batch of 1: eager %.1f us/call, compiled %.1f us/call (%.2fx)\n", eager_us,
                compiled_us, eager_us / compiled_us);
    return eager == compiled ? 0 : 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
