// Nanoseconds per element of each transcendental op over 1M f32 values, on one thread: Kiln's
// SIMD entry point (runtime/cpu/simd_math.h, the CPU executor's inner loop for f32) beside a
// plain loop over the scalar libm function (the functor's formula for sigmoid, silu and gelu).
// The per_element counter (time per element) is the comparison; the label names the
// instruction set the dispatch chose.
// Run: build/bench/transcendental_bench (built with -DKILN_BUILD_BENCH=ON).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/simd_math.h"

namespace {

namespace cpu = kiln::runtime::cpu;

constexpr size_t kCount = size_t{1} << 20;

using Simd = void (*)(const float*, float*, size_t);
using Libm = float (*)(float);

// An op, and the input range where its result is neither saturated nor overflowing, so
// neither side gets an easy special case.
struct UnaryOp {
  const char* name;
  Simd simd;
  Libm libm;
  float lo, hi;
};

const UnaryOp kUnaryOps[] = {
    {"exp", cpu::simd_exp, [](float x) { return std::exp(x); }, -80, 80},
    {"log", cpu::simd_log, [](float x) { return std::log(x); }, 1e-6f, 1e6f},
    {"tanh", cpu::simd_tanh, [](float x) { return std::tanh(x); }, -8, 8},
    {"sin", cpu::simd_sin, [](float x) { return std::sin(x); }, -100, 100},
    {"cos", cpu::simd_cos, [](float x) { return std::cos(x); }, -100, 100},
    {"sigmoid", cpu::simd_sigmoid, [](float x) { return 1.0f / (1.0f + std::exp(-x)); }, -20, 20},
    {"silu", cpu::simd_silu, [](float x) { return x / (1.0f + std::exp(-x)); }, -20, 20},
    {"gelu", cpu::simd_gelu,
     [](float x) { return 0.5f * x * std::erfc(-x * 0.70710678118654752440f); }, -6, 6},
    {"erf", cpu::simd_erf, [](float x) { return std::erf(x); }, -4, 4},
    {"log1p", cpu::simd_log1p, [](float x) { return std::log1p(x); }, -0.99f, 100},
    {"expm1", cpu::simd_expm1, [](float x) { return std::expm1(x); }, -20, 20},
};

std::vector<float> uniform(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void report(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kCount));
  // Seconds per element, printed with its unit (e.g. 1.05ns).
  state.counters["per_element"] = benchmark::Counter(
      kCount, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel(cpu::simd_target_name());
}

void BM_UnarySimd(benchmark::State& state, const UnaryOp& op) {
  const std::vector<float> in = uniform(kCount, op.lo, op.hi, 1);
  std::vector<float> out(kCount);
  for (auto _ : state) {
    op.simd(in.data(), out.data(), kCount);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state);
}

void BM_UnaryLibm(benchmark::State& state, const UnaryOp& op) {
  const std::vector<float> in = uniform(kCount, op.lo, op.hi, 1);
  std::vector<float> out(kCount);
  for (auto _ : state) {
    for (size_t i = 0; i < kCount; ++i) out[i] = op.libm(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state);
}

// pow on bases of both signs (a quarter negative, with integer exponents so the result is a
// number) and exponents in [-4, 4].
void pow_inputs(std::vector<float>* a, std::vector<float>* b) {
  *a = uniform(kCount, 0.01f, 100.0f, 2);
  *b = uniform(kCount, -4.0f, 4.0f, 3);
  for (size_t i = 0; i < kCount; i += 4) {
    (*a)[i] = -(*a)[i];
    (*b)[i] = std::round((*b)[i]);
  }
}

void BM_PowSimd(benchmark::State& state) {
  std::vector<float> a, b, out(kCount);
  pow_inputs(&a, &b);
  for (auto _ : state) {
    cpu::simd_pow(a.data(), b.data(), out.data(), kCount);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state);
}

void BM_PowLibm(benchmark::State& state) {
  std::vector<float> a, b, out(kCount);
  pow_inputs(&a, &b);
  for (auto _ : state) {
    for (size_t i = 0; i < kCount; ++i) out[i] = std::pow(a[i], b[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state);
}

}  // namespace

// Each op's two rows side by side: <op>/kiln_simd then <op>/libm.
int main(int argc, char** argv) {
  for (const UnaryOp& op : kUnaryOps) {
    const std::string name = op.name;
    benchmark::RegisterBenchmark((name + "/kiln_simd").c_str(), BM_UnarySimd, op);
    benchmark::RegisterBenchmark((name + "/libm").c_str(), BM_UnaryLibm, op);
  }
  benchmark::RegisterBenchmark("pow/kiln_simd", BM_PowSimd);
  benchmark::RegisterBenchmark("pow/libm", BM_PowLibm);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
