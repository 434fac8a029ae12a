// Attention at BERT-base's head layout (12 heads, D = 64) for sequence lengths 512 and 2048,
// batch 1, f32, on the CPU: Kiln's fused kernel (the explicit op, and the same computation
// written by hand, which the planner fuses), the composed form (the probabilities evaluated
// on their own first, so the scores go through memory as eager frameworks do), and libtorch's
// composed ops (matmul, softmax, matmul; libtorch 1.13 has no fused attention) when
// libtorch-dev is installed. Run: build/bench/attention_bench (bench/RESULTS.md).
#include <benchmark/benchmark.h>

#include <cmath>

#include "kiln/kiln.h"

#ifdef KILN_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

using kiln::Tensor;
constexpr int64_t kHeads = 12, kHeadDim = 64;

struct Qkv {
  Tensor q, k, v;
  explicit Qkv(int64_t s)
      : q(Tensor::randn({1, kHeads, s, kHeadDim}, 1).eval()),
        k(Tensor::randn({1, kHeads, s, kHeadDim}, 2).eval()),
        v(Tensor::randn({1, kHeads, s, kHeadDim}, 3).eval()) {}
};

// Two GEMMs of s x s x 64 per head.
void set_flops(benchmark::State& state, int64_t s) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      static_cast<double>(4 * kHeads * s * s * kHeadDim) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

Tensor hand_written_probabilities(const Qkv& x) {
  return kiln::softmax(kiln::matmul(x.q, x.k.transpose(-2, -1)) * (1.0 / std::sqrt(kHeadDim)), -1);
}

void BM_Attention_KilnExplicit(benchmark::State& state) {
  const Qkv x(state.range(0));
  for (auto _ : state) kiln::scaled_dot_product_attention(x.q, x.k, x.v).eval();
  set_flops(state, state.range(0));
}

void BM_Attention_KilnHandWritten(benchmark::State& state) {
  const Qkv x(state.range(0));
  for (auto _ : state) kiln::matmul(hand_written_probabilities(x), x.v).eval();
  set_flops(state, state.range(0));
}

void BM_Attention_KilnComposed(benchmark::State& state) {
  const Qkv x(state.range(0));
  for (auto _ : state) {
    Tensor p = hand_written_probabilities(x).eval();  // the scores and probabilities stored
    kiln::matmul(p, x.v).eval();
  }
  set_flops(state, state.range(0));
}

#ifdef KILN_BENCH_WITH_TORCH
void BM_Attention_Libtorch(benchmark::State& state) {
  const int64_t s = state.range(0);
  torch::manual_seed(1);
  torch::Tensor q = torch::randn({1, kHeads, s, kHeadDim}),
                k = torch::randn({1, kHeads, s, kHeadDim});
  torch::Tensor v = torch::randn({1, kHeads, s, kHeadDim});
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    torch::Tensor p =
        torch::softmax(torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(kHeadDim), -1);
    benchmark::DoNotOptimize(torch::matmul(p, v).data_ptr());
  }
  set_flops(state, s);
}
BENCHMARK(BM_Attention_Libtorch)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

BENCHMARK(BM_Attention_KilnExplicit)
    ->Arg(512)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Attention_KilnHandWritten)
    ->Arg(512)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Attention_KilnComposed)
    ->Arg(512)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
