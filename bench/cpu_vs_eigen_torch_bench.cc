// The CPU device against Eigen and libtorch eager on the same work, in one run:
// two 8-op elementwise chains over 16M floats (one input with exp and tanh; two inputs
// with abs, divide and relu), softmax and layer_norm over 4096x4096 (and
// Kiln's bf16 versions), row and column sums, and relu(x @ w + b) at 1024^3. Run:
// build/bench/cpu_vs_eigen_torch_bench (bench/RESULTS.md).
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "kiln/kiln.h"

#ifdef KILN_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

using kiln::Tensor;
constexpr int64_t kChain = int64_t{1} << 24;
constexpr int64_t kRows = 4096, kCols = 4096;
constexpr int64_t kMatmul = 1024;

// y = tanh(exp(x * 0.5 + 1) * x - x * x) + 0.25: mul add exp mul mul sub tanh add.
Tensor kiln_chain(const Tensor& x) {
  return kiln::tanh(kiln::exp(x * 0.5 + 1.0) * x - x * x) + 0.25;
}

void BM_Chain8_Kiln(benchmark::State& state) {
  Tensor x = Tensor::rand({kChain}, 1).eval();
  for (auto _ : state) kiln_chain(x).eval();
  state.SetBytesProcessed(state.iterations() * kChain * 8);
}
BENCHMARK(BM_Chain8_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Chain8_Eigen(benchmark::State& state) {
  Eigen::ArrayXf x = Eigen::ArrayXf::Random(kChain), y(kChain);
  for (auto _ : state) {
    y = ((x * 0.5f + 1.0f).exp() * x - x * x).tanh() + 0.25f;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * kChain * 8);
}
BENCHMARK(BM_Chain8_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

// z = relu(|x * 0.5 - y| / (y * y + 1) - x): mul sub abs mul add div sub relu, two inputs.
// Bound by memory more than by math (three 64 MB streams).
void BM_Chain8TwoInputs_Kiln(benchmark::State& state) {
  Tensor x = Tensor::rand({kChain}, 1).eval();
  Tensor y = Tensor::rand({kChain}, 2).eval();
  for (auto _ : state) kiln::relu(kiln::abs(x * 0.5 - y) / (y * y + 1.0) - x).eval();
  state.SetBytesProcessed(state.iterations() * kChain * 12);
}
BENCHMARK(BM_Chain8TwoInputs_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Chain8TwoInputs_Eigen(benchmark::State& state) {
  Eigen::ArrayXf x = Eigen::ArrayXf::Random(kChain), y = Eigen::ArrayXf::Random(kChain), z(kChain);
  for (auto _ : state) {
    z = ((x * 0.5f - y).abs() / (y * y + 1.0f) - x).max(0.0f);
    benchmark::DoNotOptimize(z.data());
  }
  state.SetBytesProcessed(state.iterations() * kChain * 12);
}
BENCHMARK(BM_Chain8TwoInputs_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Softmax_Kiln(benchmark::State& state) {
  Tensor x = Tensor::randn({kRows, kCols}, 2).eval();
  for (auto _ : state) kiln::softmax(x).eval();
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 8);
}
BENCHMARK(BM_Softmax_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

using RowMajor = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The same row norms in bf16 (DESIGN.md asks 16-bit rows within 1.5x of f32's time).
void BM_Softmax_Kiln_BF16(benchmark::State& state) {
  Tensor x = Tensor::randn({kRows, kCols}, 2, kiln::DType::BF16).eval();
  for (auto _ : state) kiln::softmax(x).eval();
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
}
BENCHMARK(BM_Softmax_Kiln_BF16)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNorm_Kiln_BF16(benchmark::State& state) {
  Tensor x = Tensor::randn({kRows, kCols}, 3, kiln::DType::BF16).eval();
  Tensor w = Tensor::rand({kCols}, 4, kiln::DType::BF16).eval();
  Tensor b = Tensor::rand({kCols}, 5, kiln::DType::BF16).eval();
  for (auto _ : state) kiln::layer_norm(x, w, b).eval();
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
}
BENCHMARK(BM_LayerNorm_Kiln_BF16)->Unit(benchmark::kMillisecond)->UseRealTime();

// Sums over rows and over columns: the column sum adds whole rows into per-column
// accumulators instead of scattering each element.
void BM_SumRows_Kiln(benchmark::State& state) {
  Tensor x = Tensor::randn({kRows, kCols}, 9).eval();
  for (auto _ : state) kiln::sum(x, {1}).eval();
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
}
BENCHMARK(BM_SumRows_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SumColumns_Kiln(benchmark::State& state) {
  Tensor x = Tensor::randn({kRows, kCols}, 9).eval();
  for (auto _ : state) kiln::sum(x, {0}).eval();
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
}
BENCHMARK(BM_SumColumns_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Softmax_Eigen(benchmark::State& state) {
  RowMajor x = RowMajor::Random(kRows, kCols), y(kRows, kCols);
  for (auto _ : state) {
    Eigen::ArrayXf max = x.rowwise().maxCoeff();
    y = (x.colwise() - max).exp();
    Eigen::ArrayXf total = y.rowwise().sum();
    y.colwise() /= total;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 8);
}
BENCHMARK(BM_Softmax_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNorm_Kiln(benchmark::State& state) {
  Tensor x = Tensor::randn({kRows, kCols}, 3).eval();
  Tensor w = Tensor::rand({kCols}, 4).eval(), b = Tensor::rand({kCols}, 5).eval();
  for (auto _ : state) kiln::layer_norm(x, w, b).eval();
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 8);
}
BENCHMARK(BM_LayerNorm_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNorm_Eigen(benchmark::State& state) {
  RowMajor x = RowMajor::Random(kRows, kCols), y(kRows, kCols);
  Eigen::Array<float, 1, Eigen::Dynamic> w = Eigen::Array<float, 1, Eigen::Dynamic>::Random(kCols);
  Eigen::Array<float, 1, Eigen::Dynamic> b = Eigen::Array<float, 1, Eigen::Dynamic>::Random(kCols);
  for (auto _ : state) {
    Eigen::ArrayXf mean = x.rowwise().mean();
    y = x.colwise() - mean;
    Eigen::ArrayXf inv = ((y * y).rowwise().mean() + 1e-5f).rsqrt();
    y.colwise() *= inv;
    y.rowwise() *= w;
    y.rowwise() += b;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 8);
}
BENCHMARK(BM_LayerNorm_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LinearRelu_Kiln(benchmark::State& state) {
  Tensor x = Tensor::randn({kMatmul, kMatmul}, 6).eval();
  Tensor w = Tensor::randn({kMatmul, kMatmul}, 7).eval();
  Tensor b = Tensor::randn({kMatmul}, 8).eval();
  for (auto _ : state) kiln::relu(kiln::matmul(x, w) + b).eval();
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kMatmul * kMatmul * kMatmul,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LinearRelu_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LinearRelu_Eigen(benchmark::State& state) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Matrix x = Matrix::Random(kMatmul, kMatmul), w = Matrix::Random(kMatmul, kMatmul), y;
  Eigen::RowVectorXf b = Eigen::RowVectorXf::Random(kMatmul);
  for (auto _ : state) {
    y.noalias() = x * w;
    y = (y.rowwise() + b).cwiseMax(0.0f);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kMatmul * kMatmul * kMatmul,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LinearRelu_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

#ifdef KILN_BENCH_WITH_TORCH
void BM_Chain8_Torch(benchmark::State& state) {
  torch::Tensor x = torch::rand({kChain});
  for (auto _ : state) {
    torch::Tensor y = torch::tanh(torch::exp(x * 0.5 + 1.0) * x - x * x) + 0.25;
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kChain * 8);
}
BENCHMARK(BM_Chain8_Torch)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Softmax_Torch(benchmark::State& state) {
  torch::Tensor x = torch::randn({kRows, kCols});
  for (auto _ : state) benchmark::DoNotOptimize(torch::softmax(x, 1).data_ptr());
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 8);
}
BENCHMARK(BM_Softmax_Torch)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNorm_Torch(benchmark::State& state) {
  torch::Tensor x = torch::randn({kRows, kCols});
  torch::Tensor w = torch::rand({kCols}), b = torch::rand({kCols});
  for (auto _ : state) {
    benchmark::DoNotOptimize(torch::layer_norm(x, {kCols}, w, b, 1e-5).data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 8);
}
BENCHMARK(BM_LayerNorm_Torch)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LinearRelu_Torch(benchmark::State& state) {
  torch::Tensor x = torch::randn({kMatmul, kMatmul}), w = torch::randn({kMatmul, kMatmul});
  torch::Tensor b = torch::randn({kMatmul});
  for (auto _ : state) benchmark::DoNotOptimize(torch::relu(torch::addmm(b, x, w)).data_ptr());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kMatmul * kMatmul * kMatmul,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LinearRelu_Torch)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
