// A GPT-style transformer block (samples/transformer_block.h) on random weights: how many
// kernels Kiln plans for it, its output, and eager against compiled timing.
//
//   build/samples/transformer_block
#include "samples/transformer_block.h"

#include <chrono>
#include <cstdio>
#include <string>

namespace {

using kiln::Tensor;

int count_kernels(const std::string& plan) {
  int kernels = 0;
  for (size_t at = plan.find("kernel "); at != std::string::npos;
       at = plan.find("kernel ", at + 1)) {
    if (at == 0 || plan[at - 1] == '\n') ++kernels;
  }
  return kernels;
}

}  // namespace

int main() {
  try {
    const int64_t batch = 2, tokens = 16, d_model = 64, heads = 4;
    const kiln::samples::BlockWeights w = kiln::samples::random_block_weights(d_model, heads, 1);
    const Tensor x = Tensor::randn({batch, tokens, d_model}, 100).eval();

    Tensor y = kiln::samples::transformer_block(x, w);
    const std::string plan = kiln::explain_plan({y}, kiln::ExplainDetail::kPlan);
    std::printf("one block, %lld tokens x %lld features, %lld heads: %d kernels\n",
                static_cast<long long>(batch) * tokens, static_cast<long long>(d_model),
                static_cast<long long>(heads), count_kernels(plan));
    std::printf(
        "(run with KILN_DUMP=plan,kernels to see each kernel and why every stored "
        "intermediate is stored)\n");
    const std::vector<float> out = y.to_vector<float>();
    std::printf("y[0, 0, :4] = [%.4f, %.4f, %.4f, %.4f]\n", out[0], out[1], out[2], out[3]);

    kiln::Compiled block = kiln::compile([&](const std::vector<Tensor>& in) {
      return std::vector{kiln::samples::transformer_block(in[0], w)};
    });
    const bool same = block({x})[0].to_vector<float>() == out;
    std::printf("compiled output identical: %s\n", same ? "yes" : "NO");

    auto time = [](auto&& call) {
      call();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 100; ++i) call();
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                 .count() /
             100;
    };
    const double eager_us = time([&] { kiln::samples::transformer_block(x, w).eval(); });
    const double compiled_us = time([&] { block({x}); });
    std::printf("eager %.0f us/call, compiled %.0f us/call\n", eager_us, compiled_us);
    return same ? 0 : 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
