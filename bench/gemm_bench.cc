// The CPU GEMM against the libraries considered in its place, on the same shapes in one
// run: Kiln's `relu(linear(x, w, b))` through the public API (epilogue fused), Kiln's GEMM
// core alone (runtime/cpu/gemm.h), OpenBLAS's cblas_sgemm and oneDNN's dnnl_sgemm. Both
// weight layouts: PyTorch's [out, in] (B = wᵀ) and a pre-transposed [in, out].
//
// OpenBLAS and oneDNN are loaded with dlopen (Debian's libopenblas0 and libdnnl2, no -dev
// packages needed) and skipped when absent. Give them the cores Kiln uses:
//   OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 build/bench/gemm_bench
// Results: bench/RESULTS.md; the choice they support: docs/cpu_gemm.md.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <random>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/cpu/gemm.h"

namespace {

using kiln::Tensor;

// x [m, kIn] times a weight with kIn inputs and kOut outputs (MiniLM's MLP up-projection).
constexpr int64_t kIn = 384, kOut = 1536;

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);

template <class F>
F load_symbol(const char* library, const char* symbol) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  return handle ? reinterpret_cast<F>(dlsym(handle, symbol)) : nullptr;
}

std::vector<float> random_values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// state.range(0): m; state.range(1): 1 for PyTorch's [out, in] weight layout.
void set_flops(benchmark::State& state) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(state.range(0)) * kIn * kOut *
                             static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_KilnLinearRelu(benchmark::State& state) {
  const int64_t m = state.range(0);
  const bool torch_layout = state.range(1) != 0;
  Tensor x = Tensor::from_vector(random_values(m * kIn, 1), {m, kIn}).eval();
  Tensor w = Tensor::from_vector(
                 random_values(kIn * kOut, 2),
                 torch_layout ? std::vector<int64_t>{kOut, kIn} : std::vector<int64_t>{kIn, kOut})
                 .eval();
  Tensor b = Tensor::from_vector(random_values(kOut, 3), {kOut}).eval();
  for (auto _ : state) {
    Tensor y =
        torch_layout ? kiln::relu(kiln::linear(x, w, b)) : kiln::relu(kiln::matmul(x, w) + b);
    y.eval();
  }
  set_flops(state);
}

// MiniLM's MLP up-projection as the model runs it: x [512, 384] times a PyTorch-layout weight
// [1536, 384] plus a bias, then nothing, relu or gelu (state.range(0): 0, 1, 2), all fused
// into the GEMM. The weights are scaled so the products spread like the model's (standard
// deviation about 1.5), which matters to gelu: its far-tail fit runs only for vectors with a
// lane past |x| = 2.83. The difference to the first case is the activation's cost.
void BM_KilnLinearActivation(benchmark::State& state) {
  constexpr int64_t m = 512;
  std::vector<float> weights = random_values(kIn * kOut, 2);
  for (float& v : weights) v *= 0.23f;
  Tensor x = Tensor::from_vector(random_values(m * kIn, 1), {m, kIn}).eval();
  Tensor w = Tensor::from_vector(weights, {kOut, kIn}).eval();
  Tensor b = Tensor::from_vector(random_values(kOut, 3), {kOut}).eval();
  for (auto _ : state) {
    Tensor y = kiln::linear(x, w, b);
    if (state.range(0) == 1) y = kiln::relu(y);
    if (state.range(0) == 2) y = kiln::gelu(y);
    y.eval();
  }
}

// relu(linear(x, w, b)) with every operand in f32, bf16 or f16 (state.range(1): 0, 1, 2),
// PyTorch's weight layout: the 16-bit GEMMs should run at the f32 one's speed (their
// operands are widened as they are packed, and the weight stays packed).
void BM_KilnLinearReluDtype(benchmark::State& state) {
  const int64_t m = state.range(0);
  const kiln::DType dt = state.range(1) == 0   ? kiln::DType::F32
                         : state.range(1) == 1 ? kiln::DType::BF16
                                               : kiln::DType::F16;
  Tensor x = Tensor::from_vector(random_values(m * kIn, 1), {m, kIn}).astype(dt).eval();
  Tensor w = Tensor::from_vector(random_values(kIn * kOut, 2), {kOut, kIn}).astype(dt).eval();
  Tensor b = Tensor::from_vector(random_values(kOut, 3), {kOut}).astype(dt).eval();
  for (auto _ : state) kiln::relu(kiln::linear(x, w, b)).eval();
  set_flops(state);
}

void BM_KilnGemmCore(benchmark::State& state) {
  using kiln::runtime::cpu::GemmOperand;
  const int64_t m = state.range(0);
  const bool torch_layout = state.range(1) != 0;
  std::vector<float> a = random_values(m * kIn, 1), w = random_values(kIn * kOut, 2);
  std::vector<float> c(m * kOut);
  const GemmOperand wa{a.data(), kIn, 1, 0};
  const GemmOperand wb =
      torch_layout ? GemmOperand{w.data(), 1, kIn, 1} : GemmOperand{w.data(), kOut, 1, 1};
  for (auto _ : state) kiln::runtime::cpu::gemm_f32(m, kOut, kIn, wa, wb, c.data(), kOut);
  set_flops(state);
}

// The core on MiniLM's linears at m = 512 (k, n = 384 x 1152 for the joined q/k/v, 384 x 384,
// 1536 x 384 and 384 x 1536), PyTorch-layout weights served packed from the cache as in the
// model; bench/ort_gemm.py 512:K:N times ONNX Runtime on the same shapes.
void BM_KilnGemmShapes(benchmark::State& state) {
  using kiln::runtime::cpu::GemmOperand;
  const int64_t m = 512, k = state.range(0), n = state.range(1);
  // state.range(2) weights taken in turn: 1 keeps B in cache between calls, as no model does;
  // 24 (each up to 2.4 MB) spill B out of the cores' caches as a model's layers do.
  const int64_t copies = state.range(2);
  std::vector<float> a = random_values(m * k, 1);
  std::vector<std::vector<float>> w;
  std::vector<kiln::runtime::cpu::PackedGemmB> packed;
  for (int64_t i = 0; i < copies; ++i) {
    w.push_back(random_values(k * n, static_cast<unsigned>(2 + i)));
    packed.push_back(kiln::runtime::cpu::pack_gemm_b(k, n, GemmOperand{w.back().data(), 1, k, 1}));
  }
  std::vector<float> c(m * n);
  const GemmOperand wa{a.data(), k, 1, 0};
  int64_t turn = 0;
  for (auto _ : state) {
    kiln::runtime::cpu::gemm_f32(m, wa, packed[turn], c.data(), n);
    turn = (turn + 1) % copies;
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * k * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_KilnGemmShapes)
    ->ArgsProduct({{384}, {384, 1152, 1536}, {1, 24}})
    ->ArgsProduct({{1536}, {384}, {1, 24}})
    ->ArgNames({"k", "n", "weights"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_OpenBlasSgemm(benchmark::State& state) {
  static const CblasSgemm sgemm = load_symbol<CblasSgemm>("libopenblas.so.0", "cblas_sgemm");
  if (sgemm == nullptr) return state.SkipWithError("libopenblas.so.0 not found");
  const int m = static_cast<int>(state.range(0));
  const bool torch_layout = state.range(1) != 0;
  std::vector<float> a = random_values(m * kIn, 1), w = random_values(kIn * kOut, 2);
  std::vector<float> c(m * kOut);
  constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
  for (auto _ : state) {
    sgemm(kRowMajor, kNoTrans, torch_layout ? kTrans : kNoTrans, m, kOut, kIn, 1.0f, a.data(), kIn,
          w.data(), torch_layout ? kIn : kOut, 0.0f, c.data(), kOut);
  }
  set_flops(state);
}

void BM_OneDnnSgemm(benchmark::State& state) {
  static const DnnlSgemm sgemm = load_symbol<DnnlSgemm>("libdnnl.so.2", "dnnl_sgemm");
  if (sgemm == nullptr) return state.SkipWithError("libdnnl.so.2 not found");
  const int64_t m = state.range(0);
  const bool torch_layout = state.range(1) != 0;
  std::vector<float> a = random_values(m * kIn, 1), w = random_values(kIn * kOut, 2);
  std::vector<float> c(m * kOut);
  for (auto _ : state) {
    sgemm('N', torch_layout ? 'T' : 'N', m, kOut, kIn, 1.0f, a.data(), kIn, w.data(),
          torch_layout ? kIn : kOut, 0.0f, c.data(), kOut);
  }
  set_flops(state);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 16, 64, 512, 4096}) {
    for (int64_t torch_layout : {1, 0}) b->Args({m, torch_layout});
  }
  b->ArgNames({"m", "torch_layout"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_KilnLinearRelu)->Apply(shapes);
BENCHMARK(BM_KilnLinearActivation)
    ->DenseRange(0, 2)
    ->ArgName("activation")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_KilnLinearReluDtype)
    ->ArgsProduct({{1, 16, 64, 512}, {0, 1, 2}})
    ->ArgNames({"m", "dtype"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_KilnGemmCore)->Apply(shapes);
BENCHMARK(BM_OpenBlasSgemm)->Apply(shapes);
BENCHMARK(BM_OneDnnSgemm)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
