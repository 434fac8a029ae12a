// Matrix products with block-quantized weights (docs/quantization.md), through the public API
// (`matmul(x, w.transpose(0, 1))`, the weight read in place), on 2 threads:
// - M = 1 (a decode step's GEMV), on a weight larger than the last-level cache, beside a plain
//   streaming read of a buffer of the same size: the GEMV should read its weight at >= 85%
//   of that rate. Counters: GB/s of weight bytes read.
// - M = 128 and 512 (prompt processing) on a 2048 x 5632 weight (a small LLM's MLP), beside
//   the f32 product of the same shape. Counter: GFLOP/s (2 · M · N · K per product).
// - The seven products of one llama-style layer at M = 128 and 512 in Q4_K and Q8_0, to set
//   beside llama.cpp's prompt processing of such a layer (bench/llama_cpp_layer.py).
//   build/bench/quantized_matmul_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
// Results: bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kiln/kiln.h"

namespace {

using kiln::DType;
using kiln::Tensor;

// The GEMV's weight: 49152 rows of 4096 values (113 MB in Q4_0, 214 MB in Q8_0: several
// times the last-level cache, so both the GEMV and the streaming read come from memory).
constexpr int64_t kGemvRows = 49152, kGemvK = 4096;
// The GEMM's weight: 5632 rows of 2048 values.
constexpr int64_t kGemmRows = 5632, kGemmK = 2048;

constexpr DType kFormats[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                              DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::vector<float> random_values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// A [rows, k] weight of `format` with random blocks, each f16 scale a small finite value.
Tensor random_weight(DType format, int64_t rows, int64_t k) {
  const int64_t bytes = kiln::storage_bytes(format, rows * k), block = kiln::block_bytes(format);
  auto* data = new uint8_t[bytes];
  std::mt19937 rng(7);
  for (int64_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(rng());
  const int64_t scale_at = format == DType::Q6_K ? 208 : 0;
  const uint16_t scale = kiln::Half(0.01f).bits;
  for (int64_t b = 0; b < bytes / block; ++b) std::memcpy(data + b * block + scale_at, &scale, 2);
  if (format == DType::Q4_1 || format == DType::Q5_1 || format == DType::Q4_K ||
      format == DType::Q5_K) {
    for (int64_t b = 0; b < bytes / block; ++b) std::memcpy(data + b * block + 2, &scale, 2);
  }
  return Tensor::from_blob(data, {rows, k}, format,
                           [](void* p) { delete[] static_cast<uint8_t*>(p); });
}

// Reads every byte of a buffer the size of a format's GEMV weight (state.range(0): the
// format's index), on the GEMV's threads.
void BM_StreamingRead(benchmark::State& state) {
  const DType format = kFormats[state.range(0)];
  const int64_t bytes = kiln::storage_bytes(format, kGemvRows * kGemvK);
  std::vector<uint64_t> buffer(static_cast<size_t>(bytes / 8), 1);
  std::vector<uint64_t> sums(64);
  for (auto _ : state) {
    kiln::base::parallel_for(static_cast<int64_t>(buffer.size()), 1 << 16,
                             [&](int64_t b, int64_t e) {
                               // Eight independent sums (vectorized): the loop is limited by
                               // memory, not by one chain of adds.
                               uint64_t s[8] = {};
                               int64_t i = b;
                               for (; i + 8 <= e; i += 8) {
                                 for (int j = 0; j < 8; ++j) s[j] += buffer[i + j];
                               }
                               for (; i < e; ++i) s[0] += buffer[i];
                               for (int j = 1; j < 8; ++j) s[0] += s[j];
                               sums[(b >> 16) % 64] += s[0];
                             });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetLabel(kiln::dtype_name(format));
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes) * state.iterations(),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_StreamingRead)->DenseRange(0, 7)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_QuantizedGemv(benchmark::State& state) {
  const DType format = kFormats[state.range(0)];
  const Tensor w = random_weight(format, kGemvRows, kGemvK);
  const Tensor x = Tensor::from_vector(random_values(kGemvK, 1), {1, kGemvK}).eval();
  for (auto _ : state) {
    Tensor y = kiln::matmul(x, w.transpose(0, 1));
    y.eval();
    benchmark::DoNotOptimize(y);
  }
  state.SetLabel(kiln::dtype_name(format));
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(kiln::storage_bytes(format, kGemvRows * kGemvK)) * state.iterations(),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_QuantizedGemv)->DenseRange(0, 7)->Unit(benchmark::kMillisecond)->UseRealTime();

void set_flops(benchmark::State& state, int64_t m) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(m) * kGemmRows * kGemmK * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// state.range(0): the format's index, or 8 for the f32 weight.
void BM_QuantizedGemm(benchmark::State& state) {
  const int64_t m = state.range(1);
  const bool f32 = state.range(0) == 8;
  const Tensor w =
      f32 ? Tensor::from_vector(random_values(kGemmRows * kGemmK, 2), {kGemmRows, kGemmK}).eval()
          : random_weight(kFormats[state.range(0)], kGemmRows, kGemmK);
  const Tensor x = Tensor::from_vector(random_values(m * kGemmK, 1), {m, kGemmK}).eval();
  for (auto _ : state) {
    Tensor y = kiln::matmul(x, w.transpose(0, 1));
    y.eval();
    benchmark::DoNotOptimize(y);
  }
  state.SetLabel(f32 ? "f32" : kiln::dtype_name(kFormats[state.range(0)]));
  set_flops(state, m);
}
BENCHMARK(BM_QuantizedGemm)
    ->ArgsProduct({{0, 4, 5, 7, 8}, {128, 512}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The seven matrix products of one layer of a llama-style model with hidden size 2048 and
// MLP size 5632 (attention's q, k, v and output, the MLP's gate, up and down), evaluated
// together on M tokens: what bench/llama_cpp_layer.py times llama.cpp on (a whole layer of
// such a model, so an upper bound on its products' time). state.range(0): the format's index.
void BM_LayerProducts(benchmark::State& state) {
  const DType format = kFormats[state.range(0)];
  const int64_t m = state.range(1), hidden = 2048, mlp = 5632;
  std::vector<Tensor> square, up;
  for (int i = 0; i < 4; ++i) square.push_back(random_weight(format, hidden, hidden));
  for (int i = 0; i < 2; ++i) up.push_back(random_weight(format, mlp, hidden));
  const Tensor down = random_weight(format, hidden, mlp);
  const Tensor x = Tensor::from_vector(random_values(m * hidden, 1), {m, hidden}).eval();
  const Tensor h = Tensor::from_vector(random_values(m * mlp, 3), {m, mlp}).eval();
  auto products = [&] {
    std::vector<Tensor> out;
    for (const Tensor& w : square) out.push_back(kiln::matmul(x, w.transpose(0, 1)));
    for (const Tensor& w : up) out.push_back(kiln::matmul(x, w.transpose(0, 1)));
    out.push_back(kiln::matmul(h, down.transpose(0, 1)));
    kiln::eval(out);
  };
  products();
  for (auto _ : state) products();
  state.SetLabel(kiln::dtype_name(format));
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * (4.0 * hidden * hidden + 3.0 * hidden * mlp) * state.iterations(),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_LayerProducts)
    ->ArgsProduct({{4, 5}, {128, 512}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
